"""The smallest detectable change stated by stored-baseline verdicts."""

from __future__ import annotations

import math
import random

from pytest_dmlbench.gates.stored.compare import compare_metric
from pytest_dmlbench.gates.stored.detectable import (
    detectable_between_runs_pct,
    detectable_pct,
    detectable_within_run_pct,
)
from pytest_dmlbench.gates.stored.round_blocks import block_medians
from pytest_dmlbench.results import MetricResult


def test_blocks_are_contiguous_and_a_short_tail_joins_the_last() -> None:
    assert block_medians([1.0, 2.0, 3.0, 4.0, 5.0, 10.0, 10.0, 10.0, 10.0, 10.0, 99.0]) == [3.0, 10.0]
    assert block_medians([1.0, 2.0, 3.0]) == []
    assert len(block_medians(list(range(1, 401)))) == 8


def test_noisier_runs_can_detect_only_larger_changes() -> None:
    rng = random.Random(5)
    quiet = [[math.exp(rng.gauss(0.0, 0.01)) for _ in range(80)] for _ in range(2)]
    noisy = [[math.exp(rng.gauss(0.0, 0.10)) for _ in range(80)] for _ in range(2)]
    quiet_pct = detectable_within_run_pct(quiet[0], quiet[1], 0.01)
    noisy_pct = detectable_within_run_pct(noisy[0], noisy[1], 0.01)
    assert quiet_pct is not None and noisy_pct is not None
    assert 0 < quiet_pct < noisy_pct
    assert detectable_within_run_pct([1.0] * 4, [1.0] * 4, 0.01) is None  # one block each: unknown


def test_run_to_run_spread_dominates_with_few_saves() -> None:
    assert detectable_between_runs_pct(0.05, 3, 0.01) > detectable_between_runs_pct(0.05, 10, 0.01) > 5.0


def test_verdicts_state_what_could_be_detected() -> None:
    base = MetricResult.of("step_time_s", [0.010 + 0.0001 * (i % 7) for i in range(40)])
    cur = MetricResult.of("step_time_s", [0.010 + 0.0001 * (i % 5) for i in range(40)])
    base.history = [0.0101, 0.0100, 0.0102]
    verdict = compare_metric(base, cur, 10.0)
    assert verdict is not None and verdict.kind == "unchanged"
    assert verdict.detectable_pct is not None and verdict.detectable_pct > 0
    assert "smallest change this test could detect: " in verdict.message
    assert detectable_pct([0.01] * 5, [0.01] * 5, 0.01, None, 1) is None  # one block each: unknown
