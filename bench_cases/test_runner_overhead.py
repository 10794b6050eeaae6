"""BENCHMARK FILE (timing figures, generous bounds): the runner's own per-round overhead.

Target (issue 4): the runner adds < 1 % to a 10 ms step. A callable busy-waits 10 ms and measures its own
duration; the runner's per-round sample minus that inner duration is what the runner's bookkeeping adds
to a sample. The wall time per round beyond the step (the synchronising all_reduce that starts each
round, outside the timed span) is reported beside it. Print the figures with::

    pytest --dmlbench --world-size 2 bench_cases/test_runner_overhead.py -s
"""

from __future__ import annotations

import time
from typing import Any

import pytest

from pytest_dmlbench.measure.rounds import RankSync, RoundPlan
from pytest_dmlbench.measure.runner import time_callable
from pytest_dmlbench.results.stats import summarize

STEP_S = 0.010


def _busy_wait(seconds: float, inner: list[float]) -> None:
    start = time.perf_counter()
    while time.perf_counter() - start < seconds:
        pass
    inner.append(time.perf_counter() - start)


def check_runner_overhead(rounds: int = 50) -> dict[str, float]:
    """Overhead of the runner on a 10 ms busy-wait step: inside a sample and per round of wall time."""
    inner: list[float] = []
    plan = RoundPlan(warmup=2, rounds=rounds)
    wall_start = time.perf_counter()
    timed = time_callable(_busy_wait, (STEP_S, inner), plan=plan)
    wall = time.perf_counter() - wall_start
    inner_max = RankSync().max(inner[plan.warmup :])
    bias = [outer - own for outer, own in zip(timed.samples, inner_max, strict=True)]
    median_bias = summarize(bias).median
    per_round = RankSync().max([(wall - sum(inner)) / len(inner)])[0]
    return {
        "step_s": summarize(inner_max).median,
        "sample_bias_s": median_bias,
        "sample_bias_pct": 100 * median_bias / STEP_S,
        "wall_per_round_beyond_step_s": per_round,
        "wall_per_round_beyond_step_pct": 100 * per_round / STEP_S,
    }


@pytest.mark.dmlbench(world_size=2)
def test_runner_adds_less_than_one_percent_to_a_10ms_step(dist: Any) -> None:
    figures = check_runner_overhead()
    if dist.is_main:
        print("\nrunner overhead on a 10 ms step:", {k: f"{v:.3g}" for k, v in figures.items()})
    assert figures["sample_bias_pct"] < 1.0, figures
