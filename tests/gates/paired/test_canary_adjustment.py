"""The canary adjustment of block pairs: a phase of the machine that the canary saw is taken out, a change of
the code is not, and the adjusted test keeps its level on unchanged code."""

from __future__ import annotations

import math
import random
import re
import statistics
import time

import pytest

from pytest_dmlbench.config import parse_canary
from pytest_dmlbench.errors import ConfigError
from pytest_dmlbench.gates.paired.canary_adjustment import MIN_ADJUSTED_PAIRS, adjusted_estimate, canary_logs
from pytest_dmlbench.gates.paired.stage import Stage
from pytest_dmlbench.gates.paired.statistics import estimate, judge
from pytest_dmlbench.measure.canary import CANARY_ITERATIONS, CanaryDuring, bracket, read_canary
from pytest_dmlbench.measure.clock import ManualClock, use_clock

ALPHA = 0.01


def _pairs(n: int, change: float, phase_sd: float, noise_sd: float, canary_sd: float,
           seed: int) -> tuple[list[float], list[float]]:
    """Per pair: the figure's log ratio (``change`` plus the pair's phase difference plus noise) and the
    canary's log ratio (the same phase difference plus the canary's own noise)."""
    rng = random.Random(seed)
    d, c = [], []
    for _ in range(n):
        phase = rng.gauss(0.0, phase_sd)
        d.append(change + phase + rng.gauss(0.0, noise_sd))
        c.append(phase + rng.gauss(0.0, canary_sd))
    return d, c


def test_a_phase_the_canary_saw_is_taken_out() -> None:
    # unchanged code; one slow phase hit A's blocks of five pairs (30 % slower) and the canary saw it
    d, c = _pairs(12, 0.0, 0.01, 0.01, 0.005, seed=1)
    for i in range(5):
        d[i] += math.log(1.3)
        c[i] += math.log(1.3)
    plain = estimate(d, ALPHA)
    adjusted = adjusted_estimate(d, c, ALPHA)
    assert plain is not None and adjusted is not None
    assert judge(plain, 10.0) == "regression"  # negative control: unadjusted, the phase reads as a regression
    assert judge(adjusted, 10.0) == "unchanged"
    assert abs(adjusted.ratio - 1.0) < 0.02 and adjusted.noise_pct < plain.noise_pct / 3


def test_a_real_slowdown_is_not_taken_out() -> None:
    # 20 % slower code, the machine's phases as usual: the canary moves with the phases, not with the code
    d, c = _pairs(12, math.log(1.2), 0.05, 0.01, 0.005, seed=2)
    adjusted = adjusted_estimate(d, c, ALPHA)
    plain = estimate(d, ALPHA)
    assert adjusted is not None and plain is not None
    assert judge(adjusted, 10.0) == "regression"
    assert adjusted.ratio == pytest.approx(1.2, rel=0.02)
    assert adjusted.ci[1] - adjusted.ci[0] < (plain.ci[1] - plain.ci[0]) / 2  # and the phases' noise is gone
    # the limit, stated in canary_adjustment.py: code that slowed the canary beside its own blocks (work left
    # running after a block) would be adjusted away with the phases; the canary runs in A's pytest process,
    # between blocks, where the code under test runs nothing
    masked = adjusted_estimate(d, [ci + math.log(1.2) for ci in c], ALPHA)
    assert masked is not None and judge(masked, 10.0) == "unchanged"


def test_an_uninformative_canary_costs_little() -> None:
    d, c = _pairs(16, 0.0, 0.0, 0.03, 0.03, seed=3)  # the canary is noise alone
    adjusted, plain = adjusted_estimate(d, c, ALPHA), estimate(d, ALPHA)
    assert adjusted is not None and plain is not None
    assert adjusted.detectable_pct() < plain.detectable_pct() * 1.25


def test_the_adjusted_test_keeps_its_level_on_unchanged_code() -> None:
    """The intercept's t-test with n - 2 degrees of freedom is exact for normal errors, whatever the canary:
    over 4000 A/A stages at alpha 0.05 the adjusted test flags about 5 %."""
    rng = random.Random(4)
    flagged = 0
    trials = 4000
    for seed in range(trials):
        d, c = _pairs(MIN_ADJUSTED_PAIRS, 0.0, rng.uniform(0.0, 0.1), 0.03, 0.01, seed=seed + 100)
        est = adjusted_estimate(d, c, 0.05)
        assert est is not None
        flagged += est.p_worse < 0.05
    assert 0.04 < flagged / trials < 0.06, flagged


def test_the_adjustment_needs_enough_pairs_and_readings() -> None:
    d, c = _pairs(MIN_ADJUSTED_PAIRS, 0.0, 0.05, 0.01, 0.005, seed=5)
    assert adjusted_estimate(d[:-1], c[:-1], ALPHA) is None  # too few pairs for the lost degree of freedom
    assert adjusted_estimate(d, [0.0] * len(d), ALPHA) is None  # a canary that never varied
    assert adjusted_estimate(d, c[:-1], ALPHA) is None  # pairs that do not line up
    assert adjusted_estimate(d, c, ALPHA) is not None
    assert adjusted_estimate(d, c, ALPHA).fitted == 1  # type: ignore[union-attr]
    assert canary_logs([1.0, 2.0], [1.0, 1.0]) == [0.0, pytest.approx(math.log(2.0))]
    assert canary_logs([1.0, math.nan], [1.0, 1.0]) is None
    assert canary_logs([1.0, 0.0], [1.0, 1.0]) is None
    with pytest.raises(ValueError, match="must be finite"):
        adjusted_estimate([*d[:-1], math.inf], c, ALPHA)


def test_a_stage_adjusts_only_when_told() -> None:
    d, c = _pairs(12, 0.0, 0.01, 0.01, 0.005, seed=6)
    for i in range(5):
        d[i] += math.log(1.3)
        c[i] += math.log(1.3)
    stage = Stage(a={"step_time_s": [math.exp(v) for v in d]}, b={"step_time_s": [1.0] * len(d)},
                  a_first=[True] * len(d), canary_a=[0.003 * math.exp(v) for v in c], canary_b=[0.003] * len(c))
    plain = stage.estimate("step_time_s", "lower", "ratio", ALPHA)
    stage.adjust = True
    adjusted = stage.estimate("step_time_s", "lower", "ratio", ALPHA)
    assert plain is not None and adjusted is not None
    assert judge(plain, 10.0) == "regression" and judge(adjusted, 10.0) == "unchanged"
    stage.canary_b[3] = math.nan  # one block without a canary: the stage is not adjusted
    assert stage.estimate("step_time_s", "lower", "ratio", ALPHA) == plain
    assert stage.record()["canary"] == {"a": stage.canary_a, "b": stage.canary_b}


def test_the_canary_reads_the_measurement_clock() -> None:
    assert read_canary(2000) > 0.0
    with use_clock(ManualClock(5.0)):
        assert read_canary(10) == 0.0  # a clock that does not move reads no time
    assert math.isnan(bracket(0.0, 0.003)) and bracket(0.002, 0.008) == pytest.approx(0.004)
    with pytest.raises(ValueError, match="at least one iteration"):
        read_canary(0)


def test_the_canary_during_a_block_reads_slices_until_the_block_ends() -> None:
    with CanaryDuring(iterations=600) as canary:
        time.sleep(0.05)  # the block: this thread waits, as A's process waits for a block server
    assert canary.slices and not canary._thread.is_alive()
    assert canary.reading() == statistics.median(canary.slices) * CANARY_ITERATIONS / 600
    settled = len(canary.slices)
    time.sleep(0.01)
    assert len(canary.slices) == settled  # nothing read after the block
    with use_clock(ManualClock(5.0)), CanaryDuring() as frozen:  # a clock that does not move: no reading
        time.sleep(0.01)
    assert math.isnan(frozen.reading())
    with pytest.raises(ValueError, match="duty in"):
        CanaryDuring(duty=0.0)


def test_a_bad_canary_mode_names_the_choices() -> None:
    assert (parse_canary(" ON "), parse_canary("off"), parse_canary("During")) == ("on", "off", "during")
    with pytest.raises(ConfigError, match=re.escape("--dmlbench-canary: 'maybe' is not a canary mode; choose one "
                                                    "of on, off, during")):
        parse_canary("maybe")
