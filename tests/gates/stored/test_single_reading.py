"""Figures read once per run: exact counts are compared exactly; memory peaks are tested against the saved runs
and never called unchanged without that test; timings still need a test of their own."""

from __future__ import annotations

import math

from pytest_dmlbench.gates.stored.compare import compare_metric
from pytest_dmlbench.results import MetricResult

CMD = "pytest --dmlbench t.py::x --dmlbench-save"


def count(value: float) -> MetricResult:
    return MetricResult.of("comm_bytes_per_step", [value])


def peak(value: float, history: list[float] | None = None) -> MetricResult:
    metric = MetricResult.of("peak_rss_mb", [value])
    metric.history = list(history or [])
    return metric


def test_an_equal_exact_count_is_unchanged_and_says_it_was_compared_exactly() -> None:
    verdict = compare_metric(count(4194304.0), count(4194304.0), 10.0)
    assert verdict is not None and verdict.kind == "unchanged"
    assert "an exact count, compared exactly: the same 4194304 bytes; no test ran, no alpha spent" in verdict.message
    assert verdict.p_value is None and verdict.between_runs_p is None  # no test ran
    # negative control: one byte more is not "the same"
    other = compare_metric(count(4194304.0), count(4194305.0), 10.0)
    assert other is not None and "the same" not in other.message and "differs by" in other.message


def test_an_exact_count_within_the_threshold_is_unchanged_and_says_by_how_much_it_differs() -> None:
    verdict = compare_metric(count(2e6), count(2.1e6), 10.0)
    assert verdict is not None and verdict.kind == "unchanged"
    assert "an exact count, compared exactly: it differs by 5 % (within the threshold)" in verdict.message
    assert "no alpha spent" in verdict.message
    # negative control: the same difference beyond a tighter threshold is a regression
    assert compare_metric(count(2e6), count(2.1e6), 4.0).kind == "regression"  # type: ignore[union-attr]


def test_an_exact_count_beyond_the_threshold_is_a_change_even_from_one_saved_run() -> None:
    more = compare_metric(count(1e6), count(2e6), 10.0)
    fewer = compare_metric(count(2e6), count(1e6), 10.0)
    assert more is not None and more.kind == "regression" and "beyond the threshold" in more.message
    assert fewer is not None and fewer.kind == "improvement"
    assert more.baseline_runs == 1  # no saved run-to-run spread needed: the count is exact


def test_a_non_finite_exact_count_is_untestable() -> None:
    verdict = compare_metric(count(1e6), count(math.inf), 10.0)
    assert verdict is not None and verdict.kind == "inconclusive" and verdict.inconclusive_cause == "untestable"
    assert "not finite on one side" in verdict.message


def test_a_memory_peak_with_too_few_saves_is_untestable_and_says_how_many_more() -> None:
    verdict = compare_metric(peak(400.0), peak(430.0), 10.0, refresh_command=CMD)
    assert verdict is not None and verdict.kind == "inconclusive" and verdict.inconclusive_cause == "untestable"
    assert "the baseline holds 1 saved run and a memory peak is judged from 3" in verdict.message
    assert f"save it 2 more times ({CMD})" in verdict.message
    # negative control of the old rule (the threshold alone decided): +7.5 % was "unchanged", +20 % a regression
    assert compare_metric(peak(400.0), peak(480.0), 10.0).kind == "inconclusive"  # type: ignore[union-attr]
    assert compare_metric(peak(400.0), peak(400.0), 10.0).kind == "inconclusive"  # type: ignore[union-attr]


def test_a_real_rise_of_a_memory_peak_against_enough_saves_is_a_regression() -> None:
    verdict = compare_metric(peak(400.0, [401.0, 399.0, 400.5, 399.5]), peak(520.0), 10.0)  # +30 %
    assert verdict is not None and verdict.kind == "regression"
    assert "a memory peak, judged against the saved runs: between runs p=" in verdict.message
    assert "5 saved runs of the baseline" in verdict.message
    # negative control: the same peak as saved is not a regression, and with that spread is proven unchanged
    same = compare_metric(peak(400.0, [401.0, 399.0, 400.5, 399.5]), peak(400.5), 10.0)
    assert same is not None and same.kind == "unchanged" and "inside the threshold band" in same.message
    assert same.detectable_pct is not None and 0 < same.detectable_pct < 10


def test_an_aa_memory_peak_inside_a_wide_saved_spread_is_inconclusive_not_unchanged() -> None:
    verdict = compare_metric(peak(400.0, [360.0, 450.0, 380.0, 430.0]), peak(405.0), 10.0)
    assert verdict is not None and verdict.kind != "unchanged"  # the old rule: within the threshold, unchanged
    assert verdict.kind == "inconclusive" and verdict.inconclusive_cause == "unsettled"
    assert verdict.between_runs_p is not None and verdict.between_runs_p >= 0.01
    assert "between runs, wider than the threshold band" in verdict.message
    assert "no number of saved runs can settle it at this spread" in verdict.message
    assert "smallest change this test could detect" in verdict.message


def test_negative_control_a_single_timing_sample_is_never_enough() -> None:
    verdict = compare_metric(MetricResult.of("step_time_s", [1.0]), MetricResult.of("step_time_s", [2.0]), 10)
    assert verdict is not None and verdict.kind == "inconclusive"  # never "unchanged": no test ran
    assert "record more rounds" in verdict.message
