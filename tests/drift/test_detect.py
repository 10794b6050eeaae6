"""The step detector on known series: a step, creep of 3 % a night over 5 nights, noise alone."""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Sequence

import pytest

from pytest_dmlbench.drift.detect import Detection, DriftSettings, _l1_costs, detect, fit_segments, robust_noise

Detector = Callable[[Sequence[float]], Detection]
SIGMA = 0.03  # night-to-night sd of the series below (log scale): a few percent, as nights vary here


def noisy(levels: Sequence[float], seed: int, sigma: float = SIGMA) -> list[float]:
    rng = random.Random(seed)
    return [level * math.exp(rng.gauss(0.0, sigma)) for level in levels]


def creep_levels(flat: int = 20, after: int = 2) -> list[float]:
    """``flat`` unchanged nights, then 3 % slower each night for 5 nights, then ``after`` nights there."""
    return [1.0] * flat + [1.03 ** k for k in range(1, 6)] + [1.03 ** 5] * after


def real_detector(values: Sequence[float]) -> Detection:
    return detect(values, "lower")


def never_flags(values: Sequence[float]) -> Detection:
    """A detector that finds nothing (the negative control's stand-in)."""
    return Detection((), (), SIGMA)


def creep_caught(detector: Detector, seeds: range = range(20)) -> int:
    """In how many of the seeded creeping series ``detector`` flags a regression at the creep's nights."""
    caught = 0
    for seed in seeds:
        found = detector(noisy(creep_levels(), seed)).regressions
        caught += any(20 <= f.after <= 26 for f in found)
    return caught


def test_a_clean_step_is_found_where_it_happened_with_its_size() -> None:
    values = [10.0] * 12 + [11.5] * 8
    detection = detect(values, "lower")
    assert [(s.start, s.end) for s in detection.segments] == [(0, 12), (12, 20)]
    [finding] = detection.findings
    assert (finding.kind, finding.before, finding.after) == ("regression", 11, 12)
    assert finding.change == pytest.approx(1.15)


def test_a_step_in_a_higher_is_better_figure_is_oriented() -> None:
    drop = detect([200.0] * 10 + [170.0] * 10, "higher")
    assert [f.kind for f in drop.findings] == ["regression"]
    assert drop.findings[0].change == pytest.approx(200 / 170)
    rise = detect([200.0] * 10 + [240.0] * 10, "higher")
    assert [f.kind for f in rise.findings] == ["improvement"]
    assert rise.regressions == ()


def test_a_small_step_is_reported_but_is_no_regression() -> None:
    detection = detect([10.0] * 15 + [10.5] * 15, "lower", DriftSettings(noise_floor=0.005))
    assert [f.kind for f in detection.findings] == ["step"]
    assert detection.regressions == ()


def test_noisy_steps_are_located_within_a_night() -> None:
    values = noisy([1.0] * 15 + [1.2] * 15, seed=3)
    [finding] = detect(values, "lower").regressions
    assert abs(finding.after - 15) <= 1
    assert finding.change == pytest.approx(1.2, abs=0.05)


def test_creep_of_3_percent_a_night_over_5_nights_is_flagged() -> None:
    assert creep_caught(real_detector) >= 19
    staircase = [1.0] * 12 + [1.04] * 3 + [1.08] * 3 + [1.12] * 4  # three small steps, none a regression
    detection = detect(staircase, "lower")
    assert [f.kind for f in detection.regressions] == ["creep"]
    [creep] = detection.regressions
    assert (creep.before, creep.after, creep.steps) == (11, 18, 3)
    assert creep.change == pytest.approx(1.12)


def test_negative_control_a_detector_that_never_flags_fails_the_creep_check() -> None:
    assert creep_caught(never_flags) == 0  # the creep check (at least 19 of 20 caught) fails it


def test_unchanged_nights_with_the_machines_noise_are_not_flagged() -> None:
    flagged = [seed for seed in range(200) if detect(noisy([1.0] * 30, seed), "lower").regressions]
    assert len(flagged) <= 1, flagged


def test_one_odd_night_makes_no_step() -> None:
    values = noisy([1.0] * 25, seed=7)
    values[12] *= 1.4
    assert detect(values, "lower").regressions == ()


def test_noise_is_estimated_from_neighbouring_nights_and_floored() -> None:
    values = noisy([1.0] * 200, seed=1, sigma=0.06)
    assert robust_noise([math.log(v) for v in values]) == pytest.approx(0.06, rel=0.2)
    assert detect([5.0] * 10, "lower").noise == DriftSettings().noise_floor


def test_short_series_are_not_judged_and_bad_values_are_refused() -> None:
    assert not detect([1.0, 2.0, 4.0], "lower").judged
    with pytest.raises(ValueError, match="positive and finite"):
        detect([1.0, 0.0, 1.0, 1.0, 1.0, 1.0], "lower")


def test_the_fit_is_one_segment_per_level() -> None:
    y = [0.0] * 5 + [1.0] * 5 + [0.5] * 5
    assert [(s.start, s.end, s.level) for s in fit_segments(y, 0.02, 1.5)] == [(0, 5, 0.0), (5, 10, 1.0),
                                                                                (10, 15, 0.5)]


def test_segment_costs_are_the_absolute_deviations_from_the_median() -> None:
    y = noisy([1.0] * 9, seed=5)
    cost = _l1_costs(y)
    for s in range(9):
        for t in range(s + 1, 10):
            window = sorted(y[s:t])
            m = len(window)
            centre = window[m // 2] if m % 2 else (window[m // 2 - 1] + window[m // 2]) / 2
            assert cost[s][t] == pytest.approx(sum(abs(v - centre) for v in window))


def test_heavy_tails_widen_the_noise_so_odd_nights_make_no_step() -> None:
    values = noisy([1.0] * 30, seed=2, sigma=0.02)
    for night in range(3, 30, 4):  # one night in four 15-25 % off, either way
        values[night] *= 1.25 if night % 8 == 3 else 0.85
    y = [math.log(v) for v in values]
    assert robust_noise(y) > 0.1  # the median absolute deviation alone gives 0.066 here
    assert detect(values, "lower").regressions == ()
