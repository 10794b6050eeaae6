"""The paired decision rule on block pairs: estimate, test, interval, stopping, single readings."""

from __future__ import annotations

import math
import random

import pytest
from scipy import stats

from pytest_dmlbench.gates.paired.statistics import (
    SequentialRule,
    SingleReading,
    could_clear,
    difference_of,
    estimate,
    in_points,
    is_clear,
    judge,
    log_ratios,
    pair_values,
    scale_for,
)
from pytest_dmlbench.results.stats import median as block_median
from pytest_dmlbench.results.student_t import student_t_quantile


def test_log_ratios_point_the_bad_way_for_both_directions() -> None:
    worse_time, _ = log_ratios([1.2, 1.1], [1.0, 1.0], "lower")
    worse_throughput, _ = log_ratios([1.0, 1.0], [1.2, 1.1], "higher")
    assert worse_time == pytest.approx([math.log(1.2), math.log(1.1)])
    assert worse_throughput == pytest.approx(worse_time)


def test_unusable_pairs_are_dropped_and_counted() -> None:
    values, dropped = log_ratios([1.0, math.nan, math.inf, 0.0, -1.0, 2.0], [1.0, 1.0, 1.0, 1.0, 1.0, 1.0], "lower")
    assert values == pytest.approx([0.0, math.log(2.0)]) and dropped == 4
    with pytest.raises(ValueError, match="same number of blocks"):
        log_ratios([1.0], [1.0, 2.0], "lower")


def test_block_median_drops_nan_and_survives_an_infinite_round() -> None:
    assert block_median([1.0, math.nan, 3.0, 2.0]) == 2.0
    assert block_median([1.0, math.inf, 2.0]) == 2.0
    assert math.isnan(block_median([math.nan]))


def test_matches_scipy_paired_t_test() -> None:
    rng = random.Random(3)
    a = [math.exp(rng.gauss(0.05, 0.08)) for _ in range(12)]
    b = [math.exp(rng.gauss(0.0, 0.08)) for _ in range(12)]
    values, _ = log_ratios(a, b, "lower")
    est = estimate(values, alpha=0.01)
    assert est is not None
    logs_a, logs_b = [math.log(x) for x in a], [math.log(x) for x in b]
    assert est.p_worse == pytest.approx(stats.ttest_rel(logs_a, logs_b, alternative="greater").pvalue, rel=1e-6)
    assert est.p_better == pytest.approx(stats.ttest_rel(logs_a, logs_b, alternative="less").pvalue, rel=1e-6)
    half = stats.t.ppf(0.99, 11) * stats.sem(values)
    assert est.ci_low_log == pytest.approx(est.mean_log - half, rel=1e-6)
    assert est.ci_high_log == pytest.approx(est.mean_log + half, rel=1e-6)


@pytest.mark.parametrize("df", [1, 2, 3, 7, 30])
@pytest.mark.parametrize("q", [0.9, 0.95, 0.99, 0.01])
def test_t_quantile_matches_scipy(q: float, df: int) -> None:
    assert student_t_quantile(q, df) == pytest.approx(stats.t.ppf(q, df), rel=1e-7)


def test_two_blocks_are_the_fewest_that_give_an_estimate() -> None:
    assert estimate([0.1]) is None
    est = estimate([0.1, 0.3])
    assert est is not None and est.pairs == 2
    assert est.p_worse == pytest.approx(stats.ttest_1samp([0.1, 0.3], 0.0, alternative="greater").pvalue)


def test_zero_variance_and_ties() -> None:
    same = estimate([0.0, 0.0, 0.0])
    assert same is not None and same.p_worse == 0.5 and same.ci == (1.0, 1.0)
    assert judge(same, 10.0) == "unchanged" and is_clear(same, 10.0)
    slower = estimate([math.log(1.2)] * 4)
    assert slower is not None and slower.p_worse == 0.0 and slower.p_better == 1.0
    assert judge(slower, 10.0) == "regression"
    faster = estimate([math.log(0.8)] * 4)
    assert faster is not None and judge(faster, 10.0) == "improvement"


def test_nan_log_ratios_are_refused() -> None:
    with pytest.raises(ValueError, match="finite"):
        estimate([0.1, math.nan])


def test_regression_needs_magnitude_and_significance() -> None:
    small_but_sure = estimate([math.log(1.05) + e for e in (0.001, -0.001, 0.0, 0.001)])
    big_but_noisy = estimate([math.log(1.3), math.log(0.95), math.log(1.4), math.log(0.9)])
    assert small_but_sure is not None and small_but_sure.p_worse < 0.01
    assert judge(small_but_sure, 10.0) == "unchanged"  # significant, but within the threshold
    assert big_but_noisy is not None and big_but_noisy.ratio > 1.1
    assert judge(big_but_noisy, 10.0) == "unchanged"  # beyond the threshold, but not significant


def test_the_rule_flags_a_real_slowdown_and_not_noise() -> None:
    """Negative control for the rule itself: identical noise passes, the same noise plus 15 % fails."""
    rng = random.Random(11)
    noise = [rng.gauss(0.0, 0.03) for _ in range(10)]
    aa = estimate(noise)
    ab = estimate([n + math.log(1.15) for n in noise])
    assert aa is not None and ab is not None
    assert judge(aa, 10.0) == "unchanged" and judge(ab, 10.0) == "regression"


def test_sequential_rule_adds_pairs_only_while_unclear() -> None:
    rule = SequentialRule(min_pairs=4, max_pairs=10)
    clear = estimate([0.0, 0.001, -0.001, 0.0005])
    unclear = estimate([0.05, 0.15, 0.0, 0.2])
    assert clear is not None and unclear is not None
    assert rule.wants_more([clear], 10.0, 3)  # below the minimum
    assert not rule.wants_more([clear], 10.0, 4)
    assert rule.wants_more([clear, unclear], 10.0, 4)
    assert not rule.wants_more([unclear], 10.0, 10)  # the cap
    with pytest.raises(ValueError):
        SequentialRule(min_pairs=1)


def test_the_futility_stop_ends_a_first_stage_that_could_not_settle_by_the_cap() -> None:
    """Curtailment on the current trend: a figure reading within the threshold whose noise leaves its interval
    at the cap wider than the band stops adding pairs; one that reads beyond the threshold, one that would
    settle, and every figure of a confirmation stage go on (negative controls)."""
    curtailing, plain = SequentialRule(min_pairs=4, max_pairs=24, futility=True), SequentialRule(min_pairs=4)
    hopeless = estimate([0.26, -0.23, 0.20, -0.21, 0.03])  # ~25 % noise: +-12 % at 24 pairs, a 10 % band
    assert hopeless is not None and not is_clear(hopeless, 10.0)
    assert not could_clear(hopeless, 10.0, 24) and could_clear(hopeless, 10.0, 2000)
    assert plain.wants_more([hopeless], 10.0, 5)
    assert not curtailing.wants_more([hopeless], 10.0, 5)
    assert curtailing.wants_more([hopeless], 10.0, 3)  # never before the minimum
    assert curtailing.wants_more([hopeless], 10.0, 5, confirming=True)  # a confirmation gets every pair
    promising = estimate([0.09, -0.07, 0.10, -0.08, 0.01])  # ~9 % noise: clear of a 10 % band well before 24
    assert promising is not None and not is_clear(promising, 10.0) and could_clear(promising, 10.0, 24)
    assert curtailing.wants_more([promising], 10.0, 5)
    assert curtailing.wants_more([hopeless, promising], 10.0, 5)  # one figure that could settle keeps the stage
    slowed = estimate([0.35, -0.05, 0.30, -0.02, 0.12])  # reads 14 % worse: beyond the threshold, so it goes on
    assert slowed is not None and not is_clear(slowed, 10.0) and not could_clear(slowed, 10.0, 24)
    assert curtailing.wants_more([slowed], 10.0, 5)
    assert could_clear(promising, 10.0, 5) == is_clear(promising, 10.0)  # no more pairs: clear as it stands


def test_detectable_change_shrinks_with_more_pairs() -> None:
    est = estimate([0.05, -0.05, 0.03, -0.03])
    assert est is not None
    assert est.detectable_pct(20) < est.detectable_pct(4) < math.inf
    assert est.detectable_pct(1) == math.inf


def test_single_readings_compare_exactly() -> None:
    same = SingleReading(4096.0, 4096.0, "lower", 10.0)
    assert not same.changed and same.kind() == "unchanged"
    more = SingleReading(4608.0, 4096.0, "lower", 10.0)
    assert more.changed and more.bad_pct == pytest.approx(12.5) and more.kind() == "regression"
    little = SingleReading(4100.0, 4096.0, "lower", 10.0)
    assert little.changed and little.kind() == "unchanged"
    assert SingleReading(2.0, 0.0, "lower", 10.0).kind() == "regression"


def test_overlapping_single_readings_are_not_a_change_even_when_the_medians_moved() -> None:
    """Negative control: night 4's false memory regression in shape. The medians differ by more than 10 %,
    so the exact rule alone calls it a regression; tested as a memory peak of one pair of kept worlds (the
    world offset allowed for), it is not one."""
    from pytest_dmlbench.gates.paired.memory_peaks import peak_test
    from pytest_dmlbench.gates.paired.pairs import BlockPair

    a = [707.0, 640.0, 730.0, 716.0, 598.0]
    b = [638.0, 700.0, 630.0, 645.0, 610.0]
    assert SingleReading(block_median(a), block_median(b), "lower", 10.0).kind() == "regression"
    test = peak_test([BlockPair({"peak_rss_mb": (x,)}, {"peak_rss_mb": (y,)}) for x, y in zip(a, b, strict=True)],
                     "peak_rss_mb", "lower", 0.01)
    assert test is not None and judge(test.estimate, 10.0) == "unchanged" and not is_clear(test.estimate, 10.0)


def test_fractions_are_judged_on_their_difference_in_percentage_points() -> None:
    assert scale_for("fraction") == "points" and scale_for("s") == "ratio"
    a = [0.30, 0.31, 0.29, 0.30, 0.31, 0.30]  # exposed communication 10 pp higher in A
    b = [0.20, 0.21, 0.19, 0.20, 0.20, 0.21]
    values, dropped = pair_values(a, b, "lower", "points")
    assert dropped == 0 and values == pytest.approx([x - y for x, y in zip(a, b, strict=True)])
    est = estimate(values, 0.01, "points")
    assert est is not None and est.scale == "points"
    assert judge(est, 5.0) == "regression"  # 10 pp beyond a 5 pp threshold
    assert judge(est, 15.0) == "unchanged"  # negative control: within a 15 pp threshold
    zeros = pair_values([0.0, 0.0, 0.01], [0.0, 0.01, 0.0], "lower", "points")[0]
    assert len(zeros) == 3  # zero fractions have a difference where they have no ratio
    assert log_ratios([0.0, 0.0, 0.01], [0.0, 0.01, 0.0], "lower")[1] == 3
    accuracy_drop = estimate(pair_values([0.80] * 3 + [0.81] * 3, [0.90] * 3 + [0.91] * 3, "higher", "points")[0],
                             0.01, "points")
    assert accuracy_drop is not None and accuracy_drop.mean_log == pytest.approx(0.10)
    assert accuracy_drop.detectable_pct() >= 0.0


def test_a_quotient_of_two_paired_figures_carries_both_intervals() -> None:
    rng = random.Random(7)
    many_values = [0.2 + rng.gauss(0, 0.02) for _ in range(24)]  # the larger world: 22 % slower, tightly
    one_values = [0.2 + rng.gauss(0, 0.15) for _ in range(6)]  # its one-rank base: as slow, noisily
    many, one = estimate(many_values), estimate(one_values)
    assert many is not None and one is not None
    combined = difference_of(many, one)
    assert combined.mean_log == pytest.approx(many.mean_log - one.mean_log)
    se = math.hypot(many.sd_log / math.sqrt(24), one.sd_log / math.sqrt(6))
    assert combined.sd_log / math.sqrt(combined.pairs) == pytest.approx(se)
    # Welch-Satterthwaite: the base's 5 degrees of freedom dominate, so the interval is about as wide as its own
    welch = stats.ttest_ind_from_stats(many.mean_log, many.sd_log, 24, one.mean_log, one.sd_log, 6, equal_var=False)
    assert combined.p_worse == pytest.approx(welch.pvalue / 2 if welch.statistic > 0 else 1 - welch.pvalue / 2,
                                             rel=0.25)
    assert combined.ci_high_log - combined.ci_low_log > 3 * (many.ci_high_log - many.ci_low_log)
    # the speedup is unchanged in truth: no verdict of change (negative control: the base taken as exact,
    # the shift of the larger world alone reads as a 22 % change with p far below alpha)
    assert judge(combined, 10.0) == "unchanged"
    assert judge(many, 10.0) == "regression"


def test_a_fraction_in_points_keeps_the_test_and_maps_the_interval() -> None:
    est = estimate([math.log(2.0)] * 3 + [math.log(2.0) + 0.01])  # A's speedup about half of B's
    assert est is not None
    points = in_points(est, 0.9)  # B's efficiency 90 %
    assert points.scale == "points" and points.p_worse == est.p_worse
    assert points.mean_log == pytest.approx(0.9 * (1 - math.exp(-est.mean_log)))  # about 45 pp worse
    assert points.ci_low_log < points.mean_log < points.ci_high_log
    assert judge(points, 10.0) == "regression"


def test_a_stage_of_figures_that_read_exactly_alike_may_end_at_two_pairs() -> None:
    rule = SequentialRule(min_pairs=4, max_pairs=10)
    accuracy = [0.86] * 4  # A's and B's block medians of one deterministic figure, 2 pairs
    overlapping = ([380.1, 382.0], [381.0, 379.5])  # peak memory: A's and B's block readings
    assert rule.settled_exactly([accuracy], [overlapping], 2)
    assert rule.settled_exactly([accuracy, [3.0] * 4], [], 3)
    # negative controls: each condition alone keeps the stage going
    assert not rule.settled_exactly([accuracy], [overlapping], 1)  # fewer than exact_pairs
    assert not rule.settled_exactly([accuracy], [overlapping], 4)  # the ordinary rule decides from the minimum on
    assert not rule.settled_exactly([[0.86, 0.86, 0.86, 0.85]], [], 2)  # one block differs: a real test is due
    assert not rule.settled_exactly([[math.nan] * 4], [], 2)
    assert not rule.settled_exactly([accuracy], [([400.0, 401.0], [380.0, 381.0])], 2)  # sides apart so far
    assert not rule.settled_exactly([accuracy], [([400.0], [])], 2)
    assert not rule.settled_exactly([], [overlapping], 2)  # nothing tested


def test_a_verdict_records_the_estimate_its_rule_judged_not_the_ratio_of_medians() -> None:
    # A's block medians against B's: each pair 10 % or 5 % worse, the medians' ratio differs from the mean ratio
    a, b = [1.10, 2.10, 1.10, 2.10], [1.00, 2.00, 1.00, 2.00]
    est = estimate(log_ratios(a, b, "lower")[0], 0.01)
    assert est is not None
    record = est.evidence("confirmation")
    assert record.scale == "ratio" and record.stage == "confirmation" and record.pairs == 4
    assert record.estimate == pytest.approx(math.sqrt(1.10 * 1.05))  # the geometric mean of the pairs' ratios
    assert record.estimate != pytest.approx(block_median(a) / block_median(b))  # 1.6 / 1.5
    assert (record.ci_low, record.ci_high) == pytest.approx(est.ci) and record.confidence == pytest.approx(0.98)
    assert record.noise_pct == pytest.approx(est.noise_pct)
    points = estimate([0.10, 0.12, 0.08], 0.01, "points")
    assert points is not None
    in_pp = points.evidence("first")
    assert in_pp.scale == "points" and in_pp.estimate == pytest.approx(0.10)  # fraction units, not a ratio
    assert (in_pp.ci_low, in_pp.ci_high) == pytest.approx((points.ci_low_log, points.ci_high_log))


def test_a_confirmation_stage_may_run_to_its_own_cap() -> None:
    """The confirmation tests at the run-level share of alpha, so it may take up to ``confirm_max_pairs``;
    a first stage stops at ``max_pairs`` (negative control)."""
    rule = SequentialRule(min_pairs=4, max_pairs=24, confirm_max_pairs=48)
    unclear = estimate([0.05, 0.15, 0.0, 0.2])
    assert unclear is not None
    assert not rule.wants_more([unclear], 10.0, 24)
    assert rule.wants_more([unclear], 10.0, 24, confirming=True)
    assert not rule.wants_more([unclear], 10.0, 48, confirming=True)
    assert rule.cap() == 24 and rule.cap(confirming=True) == 48
    with pytest.raises(ValueError, match="confirm_max_pairs"):
        SequentialRule(min_pairs=4, confirm_max_pairs=3)
