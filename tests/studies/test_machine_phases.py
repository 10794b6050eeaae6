"""``studies/machine_phases.py`` records a fraction of a second and reports its spreads; bad options are refused."""

from __future__ import annotations

import math

import pytest

from studies import machine_phases
from studies.machine_phases import consecutive_sd, percentile
from tests.studies.running import run_study


def test_the_spreads() -> None:
    assert percentile([4.0, 1.0, 3.0, 2.0, 5.0], 0.5) == 3.0
    assert percentile([4.0, 1.0, 3.0, 2.0, 5.0], 0.0) == 1.0 and percentile([1.0, 2.0], 1.0) == 2.0
    assert consecutive_sd([1.0, 1.0, 1.0]) == 0.0
    assert consecutive_sd([1.0, 1.1, 1.0]) == pytest.approx(100 * math.sqrt(((0.1 + 1 / 11) ** 2) / 2))
    assert math.isnan(consecutive_sd([1.0, 2.0]))  # one step has no spread


def test_a_short_recording_prints_every_line(capsys: pytest.CaptureFixture[str]) -> None:
    done = run_study(machine_phases.main, capsys, "--minutes", "0.003", "--rounds", "1", "--window", "0.001")
    assert done.returncode == 0, done.stderr
    assert "command: python -m studies.machine_phases --minutes 0.003 --rounds 1 --window 0.001" in done.stdout
    for start in ("run median / overall median:", "consecutive runs' medians differ", "runs >= 20 % slower",
                  "wall / thread CPU time per round"):
        assert start in done.stdout, done.stdout


def test_bad_options_are_refused(capsys: pytest.CaptureFixture[str]) -> None:
    done = run_study(machine_phases.main, capsys, "--minutes", "0")
    assert done.returncode == 2 and "--minutes and --window must be positive" in done.stderr
