"""studies/replay_drift_suite.py writes whole-suite histories through the history store and judges them with the
drift report's code."""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_dmlbench.results.jsonio import write_results
from studies import replay_drift_suite
from tests.drift.nights import night_results
from tests.studies.running import run_study


def test_the_suite_replay_goes_through_the_history_store(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    template = tmp_path / "night.json"
    write_results(template, night_results(1, 1.0, "ab" * 20))
    done = run_study(replay_drift_suite.main, capsys, str(template), "--histories", "2", "--nights", "20",
                     "--sigma", "1")
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[1] == ("unchanged suite: case-metrics flagged per 20-night history: [0, 0] of 3 judged "
                        "(0.00 % of series)")
    assert lines[2].startswith("one case creeping 3 % a night over 5 nights (judged 0 nights after the last): "
                               "found in 2 of 2 histories")
