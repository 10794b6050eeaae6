"""Figures read once per run (peak memory, bytes) are judged by the threshold; timings still need a test."""

from __future__ import annotations

from pytest_dmlbench.gates.stored.compare import compare_metric
from pytest_dmlbench.results import MetricResult


def test_memory_growth_beyond_the_threshold_is_a_regression() -> None:
    verdict = compare_metric(MetricResult.of("peak_rss_mb", [400.0]), MetricResult.of("peak_rss_mb", [480.0]), 10)
    assert verdict is not None and verdict.kind == "regression"
    assert "a count or a peak, not a timing, so the threshold alone decides" in verdict.message


def test_memory_within_the_threshold_is_unchanged() -> None:
    verdict = compare_metric(MetricResult.of("peak_rss_mb", [400.0]), MetricResult.of("peak_rss_mb", [430.0]), 10)
    assert verdict is not None and verdict.kind == "unchanged"


def test_negative_control_a_single_timing_sample_is_never_enough() -> None:
    verdict = compare_metric(MetricResult.of("step_time_s", [1.0]), MetricResult.of("step_time_s", [2.0]), 10)
    assert verdict is not None and verdict.kind == "inconclusive"  # never "unchanged": no test ran
    assert "record more rounds" in verdict.message


def test_fewer_bytes_is_an_improvement() -> None:
    before, after = MetricResult.of("comm_bytes_per_step", [2e6]), MetricResult.of("comm_bytes_per_step", [1e6])
    verdict = compare_metric(before, after, 10)
    assert verdict is not None and verdict.kind == "improvement"
