"""studies/inner_run_cost.py on the fewest runs: both ways run the case and a figure is printed for each; bad
counts are refused."""

from __future__ import annotations

import pytest

from studies import inner_run_cost
from tests.studies.running import run_study


def test_one_run_each_way_prints_both_figures_and_their_ratio(capsys: pytest.CaptureFixture[str]) -> None:
    ran = run_study(inner_run_cost.main, capsys, "--runs", "1", "--blocks", "1")
    assert ran.returncode == 0, ran.stdout + ran.stderr
    assert " fresh: " in ran.stdout and "forked: " in ran.stdout and "forked / fresh CPU: " in ran.stdout


def test_a_count_below_one_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    ran = run_study(inner_run_cost.main, capsys, "--runs", "0")
    assert ran.returncode == 2 and "--runs and --blocks must be at least 1" in ran.stderr
