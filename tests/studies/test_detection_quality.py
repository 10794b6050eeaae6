"""``studies/detection_quality.py``: the rates it counts from recorded runs, and one tiny recording end to end."""

from __future__ import annotations

import random
import re

import pytest

from studies import detection_quality
from studies.detection_quality import Pair, Run, evaluate
from tests.studies.running import run_study


def runs(rng: random.Random, step_s: float, count: int, rounds: int = 20) -> list[Run]:
    return [Run([step_s * rng.gauss(1, 0.01) for _ in range(rounds)], [], []) for _ in range(count)]


def test_a_doubled_step_is_caught_and_an_unchanged_one_is_not() -> None:
    """The stored rule judges from three saved runs (a baseline saved once leaves it inconclusive);
    ``median:10%`` needs none."""
    rng = random.Random(0)
    pairs = [Pair(u, s) for u, s in zip(runs(rng, 0.01, 8), runs(rng, 0.02, 8), strict=True)]
    rates = evaluate(pairs, saves=3, clock="wall", rounds=20, threshold=10.0, alpha=0.01)
    assert rates.trials == 5 and rates.comparisons == 10  # two metrics per unchanged run
    assert rates.detected == {"saved": 5, "once": 0, "median": 5}
    assert rates.false == {"saved": 0, "once": 0, "median": 0}
    assert rates.slowdown_median == pytest.approx(1.0, abs=0.05)
    # negative control: "slowed" runs that are not slower are caught by no rule
    same = [Pair(u, s) for u, s in zip(runs(rng, 0.01, 8), runs(rng, 0.01, 8), strict=True)]
    assert evaluate(same, 3, "wall", 20, 10.0, 0.01).detected == {"saved": 0, "once": 0, "median": 0}


def test_a_tiny_recording_prints_its_tables(capsys: pytest.CaptureFixture[str]) -> None:
    done = run_study(detection_quality.main, capsys, "--pairs", "3", "--saves", "1", "--rounds", "10",
                     "--width", "8", "--warmup", "0")
    assert done.returncode in (0, 1), done.stderr  # 1: no round count met both targets, as expected here
    assert "workload: MLP 8x3, batch 64, 1 thread; 3 pairs" in done.stdout
    assert "thread CPU time of the step" in done.stdout
    assert len(re.findall(r"^median:10%: ", done.stdout, re.MULTILINE)) == 2  # a verdict line per clock


def test_saves_must_leave_pairs_to_judge(capsys: pytest.CaptureFixture[str]) -> None:
    assert run_study(detection_quality.main, capsys, "--pairs", "2", "--saves", "2").returncode == 2
