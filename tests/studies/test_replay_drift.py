"""studies/replay_drift.py runs the real detector over replayed histories and prints its table."""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_dmlbench.results.jsonio import write_results
from studies import replay_drift
from tests.drift.nights import night_results
from tests.studies.running import run_study


def test_the_replay_reports_false_flags_and_creep_caught(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    paired = tmp_path / "aa.json"
    write_results(paired, night_results(1, 1.0, "ab" * 20, ratio=1.01))
    done = run_study(replay_drift.main, capsys, "--series", "40", "--sigmas", "2", str(paired))
    assert done.returncode == 0, done.stderr
    rows = [line.split(" | ") for line in done.stdout.splitlines() if line.startswith("| Gaussian sd 2 %")]
    [[_, false, *caught]] = rows
    assert false == "0.0 %" and len(caught) == 3
    assert float(caught[-1].split()[0]) >= 90.0  # five nights after the creep ended
    assert "| recorded A/A night ratios (1 figures, robust sd 0.0 %) |" in done.stdout


def test_a_results_file_without_paired_pairs_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    plain = tmp_path / "plain.json"
    write_results(plain, night_results(1, 1.0, "ab" * 20))
    done = run_study(replay_drift.main, capsys, "--series", "5", str(plain))
    assert done.returncode == 2
    assert done.stderr == f"replay_drift: no paired block pairs of a timed figure in {plain}\n"

