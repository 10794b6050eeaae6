"""``studies/profiler_cost.py`` times a few steps plain and profiled and reports both clocks' ratio."""

from __future__ import annotations

import re

import pytest

from studies import profiler_cost
from tests.studies.running import run_study


def test_one_pair_of_two_steps(capsys: pytest.CaptureFixture[str]) -> None:
    done = run_study(profiler_cost.main, capsys, "--steps", "2", "--width", "8", "--pairs", "1")
    assert done.returncode == 0, done.stderr
    assert "command: python -m studies.profiler_cost --steps 2 --width 8 --pairs 1" in done.stdout
    costs = re.findall(r"^(wall|thread CPU) time of 2 steps: [\d.]+ s plain, [\d.]+ s profiled \(medians of 1 "
                       r"pairs\); the profiler's cost [\d.]+x$", done.stdout, re.MULTILINE)
    assert costs == ["wall", "thread CPU"], done.stdout
