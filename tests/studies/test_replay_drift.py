"""ci/replay_drift.py runs the real detector over replayed histories and prints its table."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from pytest_dmlbench.results.jsonio import write_results
from tests.drift.nights import night_results

SCRIPT = Path(__file__).resolve().parents[2] / "ci" / "replay_drift.py"


def replay(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True,
                          cwd=SCRIPT.parents[1])


def test_the_replay_reports_false_flags_and_creep_caught(tmp_path: Path) -> None:
    paired = tmp_path / "aa.json"
    write_results(paired, night_results(1, 1.0, "ab" * 20, ratio=1.01))
    done = replay("--series", "40", "--sigmas", "2", str(paired))
    assert done.returncode == 0, done.stderr
    rows = [line.split(" | ") for line in done.stdout.splitlines() if line.startswith("| Gaussian sd 2 %")]
    [[_, false, *caught]] = rows
    assert false == "0.0 %" and len(caught) == 3
    assert float(caught[-1].split()[0]) >= 90.0  # five nights after the creep ended
    assert "| recorded A/A night ratios (1 figures, robust sd 0.0 %) |" in done.stdout


def test_a_results_file_without_paired_pairs_is_refused(tmp_path: Path) -> None:
    plain = tmp_path / "plain.json"
    write_results(plain, night_results(1, 1.0, "ab" * 20))
    done = replay("--series", "5", str(plain))
    assert done.returncode == 2
    assert done.stderr == f"replay_drift: no paired block pairs of a timed figure in {plain}\n"


def test_the_suite_replay_goes_through_the_history_store(tmp_path: Path) -> None:
    template = tmp_path / "night.json"
    write_results(template, night_results(1, 1.0, "ab" * 20))
    done = subprocess.run([sys.executable, str(SCRIPT.with_name("replay_drift_suite.py")), str(template),
                           "--histories", "2", "--nights", "20", "--sigma", "1"], capture_output=True, text=True,
                          cwd=SCRIPT.parents[1])
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[1] == ("unchanged suite: case-metrics flagged per 20-night history: [0, 0] of 3 judged "
                        "(0.00 % of series)")
    assert lines[2].startswith("one case creeping 3 % a night over 5 nights (judged 0 nights after the last): "
                               "found in 2 of 2 histories")
