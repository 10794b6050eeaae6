"""Between-run noise: the t distribution, the prediction test, and its place in the verdict rule."""

from __future__ import annotations

import math

import pytest
from scipy import stats

from pytest_dmlbench.gates.stored.between_runs import MIN_RUNS, between_run_test
from pytest_dmlbench.gates.stored.compare import compare_metric
from pytest_dmlbench.results import MetricResult
from pytest_dmlbench.results.student_t import student_t_sf
from tests.results.casefactory import step_samples


@pytest.mark.parametrize("df", [1, 2, 3, 4, 5, 8, 9, 30])
@pytest.mark.parametrize("t", [-6.0, -1.5, -0.1, 0.0, 0.4, 1.0, 2.9, 7.5, 60.0])
def test_student_t_tail_matches_scipy(t: float, df: int) -> None:
    assert student_t_sf(t, df) == pytest.approx(stats.t.sf(t, df), abs=1e-12)


def test_student_t_edges() -> None:
    assert student_t_sf(math.inf, 3) == 0.0 and student_t_sf(-math.inf, 3) == 1.0
    assert math.isnan(student_t_sf(math.nan, 3))
    with pytest.raises(ValueError, match="degrees of freedom"):
        student_t_sf(1.0, 0)


def test_prediction_test_matches_a_textbook_t_prediction_interval() -> None:
    medians = [0.0100, 0.0104, 0.0097, 0.0102, 0.0099]
    logs = [math.log(m) for m in medians]
    mean, sd = sum(logs) / 5, stats.tstd(logs)
    current = 0.0110
    expected = stats.t.sf((math.log(current) - mean) / (sd * math.sqrt(1 + 1 / 5)), 4)
    result = between_run_test(medians, current, "greater")
    assert result is not None and result.runs == 5
    assert result.p_value == pytest.approx(expected)
    assert result.spread_pct == pytest.approx(100 * (math.exp(sd) - 1))
    assert between_run_test(medians, current, "less").p_value == pytest.approx(1 - expected)  # type: ignore[union-attr]


def test_too_few_runs_or_unusable_medians_give_no_test() -> None:
    assert between_run_test([0.01] * (MIN_RUNS - 1), 0.02, "greater") is None
    assert between_run_test([0.01, math.nan, math.inf, 0.011], 0.02, "greater") is None
    assert between_run_test([0.01, 0.011, 0.012], math.nan, "greater") is None


def test_medians_at_or_below_zero_use_the_metrics_own_scale() -> None:
    """Exposed-communication fractions can be 0 or slightly negative: no logarithm then."""
    medians = [0.02, -0.01, 0.0, 0.01]
    mean, sd = sum(medians) / 4, stats.tstd(medians)
    result = between_run_test(medians, 0.09, "greater")
    assert result is not None and result.spread_pct is None and result.spread == pytest.approx(sd)
    assert result.p_value == pytest.approx(stats.t.sf((0.09 - mean) / (sd * math.sqrt(1 + 1 / 4)), 3))
    assert "run-to-run spread 0.0129 (standard deviation)" in result.describe(0.01)


def test_zero_spread_makes_any_move_significant_and_no_move_not() -> None:
    assert between_run_test([0.01] * 4, 0.0101, "greater").p_value == 0.0  # type: ignore[union-attr]
    assert between_run_test([0.01] * 4, 0.01, "greater").p_value == 0.5  # type: ignore[union-attr]
    assert between_run_test([0.01] * 4, 0.0099, "greater").p_value == 1.0  # type: ignore[union-attr]


def run_with_history(median: float, history: list[float], seed: int) -> MetricResult:
    metric = MetricResult.of("step_time_s", step_samples(median, 30, seed, spread=0.02))
    metric.history = history
    return metric


NOISY_HISTORY = [0.0080, 0.0125, 0.0092, 0.0118]  # whole runs differ by ~20 % on this machine
QUIET_HISTORY = [0.0099, 0.0101, 0.0100, 0.0102]


def test_a_run_inside_the_baselines_run_to_run_spread_is_not_a_regression() -> None:
    """Within-run tests alone flag this 14 % shift; the saved runs show such shifts are ordinary."""
    current = MetricResult.of("step_time_s", step_samples(0.0114, 30, seed=9, spread=0.02))
    alone = compare_metric(run_with_history(0.0100, [], seed=1), current, 10.0, min_runs=1)
    assert alone is not None and alone.kind == "regression"  # negative control: judged without history, flagged
    noisy = compare_metric(run_with_history(0.0100, NOISY_HISTORY, seed=1), current, 10.0)
    assert noisy is not None and noisy.kind != "regression"
    assert noisy.baseline_runs == 5 and noisy.between_runs_p is not None and noisy.between_runs_p >= 0.01
    assert "5 saved runs of the baseline" in noisy.message
    # nor is it proven unchanged: at a 20 % spread the prediction interval is far wider than the band
    assert noisy.kind == "inconclusive" and noisy.inconclusive_cause == "unsettled"
    assert "between runs, wider than the threshold band" in noisy.message


def test_a_move_beyond_a_quiet_baselines_spread_is_still_a_regression() -> None:
    current = MetricResult.of("step_time_s", step_samples(0.0114, 30, seed=9, spread=0.02))
    verdict = compare_metric(run_with_history(0.0100, QUIET_HISTORY, seed=1), current, 10.0)
    assert verdict is not None and verdict.kind == "regression"
    assert verdict.between_runs_p is not None and verdict.between_runs_p < 0.01
    assert "between runs p=" in verdict.message and "run-to-run spread" in verdict.message


def test_improvements_use_the_same_between_run_test() -> None:
    current = MetricResult.of("step_time_s", step_samples(0.0086, 30, seed=9, spread=0.02))
    assert compare_metric(run_with_history(0.0100, QUIET_HISTORY, 1), current, 10.0).kind == "improvement"  # type: ignore[union-attr]
    noisy = compare_metric(run_with_history(0.0100, NOISY_HISTORY, 1), current, 10.0)
    assert noisy is not None and noisy.kind == "inconclusive" and noisy.inconclusive_cause == "unsettled"


def test_without_history_the_message_says_how_to_measure_run_to_run_noise() -> None:
    current = MetricResult.of("step_time_s", step_samples(0.013, 30, seed=9))
    verdict = compare_metric(run_with_history(0.0100, [], seed=1), current, 10.0)
    assert verdict is not None and verdict.between_runs_p is None and verdict.baseline_runs == 1
    assert verdict.kind == "inconclusive"  # +30 %, but no saved runs say what whole runs differ by
    assert "run-to-run noise not measured: the baseline holds 1 saved run" in verdict.message
    assert "save it 2 more times" in verdict.message


def test_memory_peaks_are_judged_against_the_saved_runs() -> None:
    base = MetricResult.of("peak_rss_mb", [400.0])
    base.history = [380.0, 430.0, 395.0, 420.0]
    verdict = compare_metric(base, MetricResult.of("peak_rss_mb", [450.0]), 10.0)
    assert verdict is not None and verdict.kind == "inconclusive"  # +12.5 %, but runs differ by that much
    assert verdict.inconclusive_cause == "unsettled" and verdict.between_runs_p is not None
    assert "a memory peak, judged against the saved runs: between runs p=" in verdict.message
    base.history = [400.0, 401.0, 399.0, 400.0]
    assert compare_metric(base, MetricResult.of("peak_rss_mb", [450.0]), 10.0).kind == "regression"  # type: ignore[union-attr]
