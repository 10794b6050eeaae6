"""The verdict rule: threshold AND significance, directions, ties, tiny samples, zero variance, NaN."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pytest_dmlbench.errors import ConfigError
from pytest_dmlbench.gates.stored.compare import REFRESH_COMMAND, CompareSettings, compare_case, compare_run
from pytest_dmlbench.gates.stored.compare import compare_metric as judged_on_runs
from pytest_dmlbench.gates.thresholds import Thresholds
from pytest_dmlbench.gates.wording import failing_verdicts
from pytest_dmlbench.gates.wording import failure_text as failure_report
from pytest_dmlbench.results import MetricResult, Verdict
from pytest_dmlbench.results.student_t import DEFAULT_ALPHA
from tests.results.casefactory import make_case, make_run, step_samples

NAN = float("nan")


def compare_metric(baseline: MetricResult | None, current: MetricResult, threshold_pct: float,
                   alpha: float = DEFAULT_ALPHA, refresh_command: str = REFRESH_COMMAND.format(nodeid="..."),
                   new_reason: str = "no baseline yet") -> Verdict | None:
    """The rule on one saved run (``min_runs=1``): these tests are of the block test and the threshold;
    the run-to-run part is tested in test_between_runs and tests/gates/test_stored_rule."""
    return judged_on_runs(baseline, current, threshold_pct, alpha, refresh_command, new_reason, min_runs=1)


def step(samples: list[float]) -> MetricResult:
    return MetricResult.of("step_time_s", samples)


def throughput(samples: list[float]) -> MetricResult:
    return MetricResult.of("throughput_samples_per_s", samples)


def test_a_large_significant_slowdown_is_a_regression_with_full_evidence() -> None:
    base = step(step_samples(0.010, 20, seed=1))
    cur = step(step_samples(0.0125, 20, seed=2))
    verdict = compare_metric(base, cur, 10.0, 0.01, "pytest --dmlbench x.py::t --dmlbench-save")
    assert verdict is not None and verdict.kind == "regression"
    assert verdict.current_median is not None and verdict.baseline_median is not None
    assert verdict.ratio == pytest.approx(verdict.current_median / verdict.baseline_median)
    assert verdict.p_value is not None and verdict.p_value < 1e-6
    msg = verdict.message
    assert msg.startswith("step_time_s regressed against the baseline: 10")
    for part in (
        " ms -> 12",
        "% slower",
        "threshold 10 %",
        "p=",
        "< alpha 0.01",
        "pytest --dmlbench x.py::t --dmlbench-save",
    ):
        assert part in msg, (part, msg)


def test_small_change_below_threshold_is_unchanged_even_when_significant() -> None:
    base = step(step_samples(0.010, 30, seed=1, spread=0.001))
    cur = step(step_samples(0.0105, 30, seed=2, spread=0.001))  # +5 %, clearly significant
    verdict = compare_metric(base, cur, 10.0)
    assert verdict is not None and verdict.kind == "unchanged"
    assert verdict.p_value is not None and verdict.p_value < 0.01
    stricter = compare_metric(base, cur, 4.0)
    assert stricter is not None and stricter.kind == "regression"


def test_large_but_insignificant_change_is_not_a_regression_and_not_proven_unchanged() -> None:
    base = step([0.010, 0.030, 0.011, 0.029, 0.031, 0.012, 0.028, 0.013, 0.030, 0.011])  # blocks: 29, 13 ms
    cur = step([0.031, 0.012, 0.030, 0.013, 0.032, 0.011, 0.029, 0.010, 0.012, 0.013])  # blocks: 30, 12 ms
    verdict = compare_metric(base, cur, 10.0)
    assert verdict is not None and verdict.kind == "inconclusive" and verdict.inconclusive_cause == "unsettled"
    assert verdict.p_value is not None and verdict.p_value > 0.01
    assert "within the run, wider than the threshold band; more rounds would narrow" in verdict.message


def test_direction_higher_is_better_flags_a_throughput_drop_and_reports_an_improvement() -> None:
    base = throughput(step_samples(1000.0, 20, seed=3))
    drop = compare_metric(base, throughput(step_samples(800.0, 20, seed=4)), 10.0)
    rise = compare_metric(base, throughput(step_samples(1250.0, 20, seed=5)), 10.0)
    assert drop is not None and drop.kind == "regression"
    assert rise is not None and rise.kind == "improvement"
    assert "improved" in rise.message and "refresh it" in rise.message


def test_faster_step_is_an_improvement_not_a_regression() -> None:
    verdict = compare_metric(step(step_samples(0.010, 20, 1)), step(step_samples(0.008, 20, 2)), 10.0)
    assert verdict is not None and verdict.kind == "improvement"


def test_metric_without_direction_is_never_compared() -> None:
    base = MetricResult.of("compute_comm_ratio", [1.0] * 20)
    cur = MetricResult.of("compute_comm_ratio", [9.0] * 20)
    assert compare_metric(base, cur, 10.0) is None


def test_missing_baseline_metric_is_new() -> None:
    verdict = compare_metric(None, step([0.01, 0.011]), 10.0)
    assert verdict is not None and verdict.kind == "new" and verdict.baseline_median is None


def test_one_against_one_sample_is_never_significant_and_says_why() -> None:
    verdict = compare_metric(step([0.010]), step([0.050]), 10.0)
    assert verdict is not None and verdict.kind == "inconclusive"  # no test ran: never "unchanged"
    assert "no test: 0 baseline vs 0 current blocks of rounds (1 and 1 rounds)" in verdict.message
    assert "record more rounds" in verdict.message


def test_zero_variance_identical_samples_are_unchanged() -> None:
    verdict = compare_metric(step([0.01] * 10), step([0.01] * 10), 10.0)
    assert verdict is not None and verdict.kind == "unchanged" and verdict.p_value == 0.5  # no move either way
    assert verdict.ratio == 1.0


def test_zero_variance_shift_is_significant_with_enough_samples_only() -> None:
    doubled = compare_metric(step([1.0] * 10), step([2.0] * 10), 10.0)
    assert doubled is not None and doubled.kind == "regression"
    few = compare_metric(step([1.0] * 3), step([2.0] * 3), 10.0)
    assert few is not None and few.kind == "inconclusive"


PHASE_LEVELS = [0.8, 1.2, 0.85, 1.15, 0.9, 1.1, 1.0, 1.0]  # slow and fast phases of a shared machine


def phased_run(scale: float, order: list[int]) -> list[float]:
    """Eight phases of 20 rounds each at the levels ``order`` picks, times ``scale``, with a small jitter."""
    return [scale * PHASE_LEVELS[p] * (1 + 0.001 * ((j * 7 + i) % 5)) for i, p in enumerate(order) for j in range(20)]


def one_round_per_phase_in_turn(rounds: list[float]) -> list[float]:
    """The same rounds reordered as if they were independent: each block of rounds mixes every phase."""
    return [rounds[(k % 8) * 20 + k // 8] for k in range(160)]


def test_a_slow_phase_counts_once_not_once_per_round() -> None:
    base = phased_run(1.0, list(range(8)))
    cur = phased_run(1.13, [3, 0, 6, 1, 5, 2, 7, 4])  # 13 % slower, but the phases move whole blocks by +-20 %
    phased = compare_metric(step(base), step(cur), 10.0)
    assert phased is not None and phased.kind == "inconclusive" and phased.inconclusive_cause == "unsettled"
    assert phased.ratio is not None and 1.12 < phased.ratio < 1.14 and phased.p_value is not None
    assert phased.p_value > 0.01
    assert "one-sided t-test on log block medians" in phased.message
    assert "8 baseline vs 8 current blocks" in phased.message
    # Negative control: the very same rounds, ordered as a test on independent rounds would see them, are
    # significant; any order-blind test on rounds (Mann-Whitney, say) gives both orders the same p.
    mixed = compare_metric(step(one_round_per_phase_in_turn(base)), step(one_round_per_phase_in_turn(cur)), 10.0)
    assert mixed is not None and mixed.kind == "regression" and sorted(one_round_per_phase_in_turn(cur)) == sorted(cur)


def test_nan_samples_are_dropped_counted_and_reported() -> None:
    base = step([*step_samples(0.010, 20, 1), NAN, NAN])
    cur = step([*step_samples(0.013, 20, 2), NAN])
    verdict = compare_metric(base, cur, 10.0)
    assert verdict is not None and verdict.kind == "regression"
    assert "dropped NaN samples: 2 of 22 baseline, 1 of 21 current" in verdict.message
    assert not math.isnan(verdict.current_median or NAN)


def test_all_nan_current_is_not_compared_and_says_so() -> None:
    verdict = compare_metric(step([0.01] * 5), step([NAN] * 5), 10.0)
    assert verdict is not None and verdict.kind == "inconclusive"
    assert "no finite current samples" in verdict.message


def test_zero_baseline_median() -> None:
    verdict = compare_metric(
        MetricResult.of("comm_bytes_per_step", [0.0] * 10),
        MetricResult.of("comm_bytes_per_step", [100.0] * 10),
        10.0,
    )
    assert verdict is not None and verdict.kind == "regression" and verdict.ratio == math.inf


def test_case_threshold_beats_the_run_default() -> None:
    base = make_case(step_median=0.010, seed=1)
    slower = make_case(step_median=0.0113, seed=2)  # +13 %
    assert {v.kind for v in compare_case(base, slower, CompareSettings(min_runs=1), Thresholds(10.0))} >= {"regression"}
    slower.threshold_pct = 20.0
    verdicts = compare_case(base, slower, CompareSettings(min_runs=1), Thresholds(10.0))
    assert all(v.threshold_pct == 20.0 for v in verdicts)
    timed = [v for v in verdicts if v.metric != "peak_rss_mb"]  # a peak waits for saved runs (test_single_reading)
    assert len(timed) == 2 and all(v.kind == "unchanged" for v in timed)


def test_compare_case_skips_directionless_metrics_and_marks_missing_case_new() -> None:
    case = make_case()
    new = compare_case(None, case, CompareSettings())
    assert [v.metric for v in new] == ["step_time_s", "throughput_samples_per_s", "peak_rss_mb"]
    assert {v.kind for v in new} == {"new"}


def test_compare_run_matches_cases_by_node_id_and_quotes_the_refresh_command() -> None:
    baseline = make_run([make_case("t.py::a[x y]", 0.010, seed=1), make_case("t.py::b", 0.010, seed=2)])
    current = make_run(
        [
            make_case("t.py::b", 0.010, seed=3),
            make_case("t.py::a[x y]", 0.014, seed=4),
            make_case("t.py::c", 0.010, seed=5),
        ]
    )
    compared = compare_run(baseline, current, CompareSettings(min_runs=1))
    kinds = {c.nodeid: {v.metric: v.kind for v in c.verdicts} for c in compared.cases}
    assert kinds["t.py::a[x y]"]["step_time_s"] == "regression"
    assert kinds["t.py::b"]["step_time_s"] == "unchanged"
    assert set(kinds["t.py::c"].values()) == {"new"}
    assert not current.cases[0].verdicts  # the input is not modified
    failing = failing_verdicts(compared.cases[1].verdicts)
    assert failing and "pytest --dmlbench 't.py::a[x y]' --dmlbench-save" in failure_report(failing)


def test_fail_on_improvement_adds_improvements() -> None:
    verdicts = compare_case(
        make_case(step_median=0.010, seed=1), make_case(step_median=0.007, seed=2), CompareSettings(min_runs=1)
    )
    assert failing_verdicts(verdicts) == []
    assert {v.kind for v in failing_verdicts(verdicts, fail_on_improvement=True)} == {"improvement"}


def test_bad_case_threshold_names_the_case() -> None:
    case = make_case("t.py::x", threshold_pct=-5)
    with pytest.raises(ConfigError, match=r"threshold of t.py::x"):
        compare_case(make_case("t.py::x"), case, CompareSettings())


@pytest.mark.parametrize("bad", [0.0, 1.0, 2.0])
def test_bad_alpha_is_a_config_error(bad: float) -> None:
    with pytest.raises(ConfigError, match="alpha must be"):
        CompareSettings(alpha=bad)


@settings(max_examples=40, deadline=None)
@given(
    st.lists(st.floats(0.001, 1.0), min_size=1, max_size=25),
    st.lists(st.floats(0.001, 1.0), min_size=1, max_size=25),
    st.sampled_from([2.0**-10, 0.5, 2.0, 2.0**20]),  # powers of two scale exactly: no new ties
)
def test_rule_is_unit_free_and_mirrors_between_directions(
    base: list[float], cur: list[float], scale: float
) -> None:
    """Scaling both sides leaves the verdict alone; swapping the sides turns a regression into an
    improvement (the p-value is symmetric; the percentage is of the other median, hence the margin)."""
    verdict = compare_metric(step(base), step(cur), 10.0)
    scaled = compare_metric(step([x * scale for x in base]), step([x * scale for x in cur]), 10.0)
    swapped = compare_metric(step(cur), step(base), 10.0)
    assert verdict is not None and scaled is not None and swapped is not None
    assert scaled.kind == verdict.kind
    if verdict.kind == "regression" and verdict.ratio is not None and verdict.ratio > 1 / 0.9:
        assert swapped.kind == "improvement" and swapped.p_value == pytest.approx(verdict.p_value)
    if verdict.kind == "improvement":
        assert swapped.kind == "regression" and swapped.p_value == pytest.approx(verdict.p_value)
