"""The stored-baseline rule's verdict kinds: untestable figures are inconclusive, never unchanged; unchanged
is proven."""

from __future__ import annotations

import random

from pytest_dmlbench.gates.stored.compare import compare_metric
from pytest_dmlbench.results import MetricResult

QUIET_RUNS = [0.0100, 0.0101, 0.0099, 0.0100]  # four earlier saves' medians: 1 % run-to-run spread


def noisy(level: float, rounds: int, seed: int, name: str = "step_time_s", spread: float = 0.02) -> MetricResult:
    rng = random.Random(seed)
    return MetricResult.of(name, [level * (1 + rng.gauss(0, spread)) for _ in range(rounds)])


def saved(level: float, rounds: int, seed: int, history: list[float], name: str = "step_time_s") -> MetricResult:
    metric = noisy(level, rounds, seed, name)
    metric.history = list(history)
    return metric


def test_too_few_rounds_for_two_blocks_is_inconclusive_whatever_the_change() -> None:
    verdict = compare_metric(saved(0.010, 7, 1, QUIET_RUNS), noisy(0.050, 7, 2), 10.0)
    assert verdict is not None and verdict.kind == "inconclusive"
    assert "no test: 1 baseline vs 1 current blocks" in verdict.message and "x5" in verdict.message
    # negative control: the same change measured over enough rounds is a regression
    judged = compare_metric(saved(0.010, 10, 1, QUIET_RUNS), noisy(0.050, 10, 2), 10.0)
    assert judged is not None and judged.kind == "regression"


def test_a_baseline_saved_fewer_times_than_min_runs_is_inconclusive_and_says_how_many_saves_remain() -> None:
    verdict = compare_metric(saved(0.010, 40, 1, []), noisy(0.013, 40, 2), 10.0,
                             refresh_command="pytest --dmlbench --world-size 2 t.py::x --dmlbench-save")
    assert verdict is not None and verdict.kind == "inconclusive"
    assert "holds 1 saved run" in verdict.message and "save it 2 more times" in verdict.message
    assert "--world-size 2" in verdict.message
    judged = compare_metric(saved(0.010, 40, 1, QUIET_RUNS), noisy(0.013, 40, 2), 10.0)
    assert judged is not None and judged.kind == "regression"  # negative control: with saved runs, judged
    assert compare_metric(saved(0.010, 40, 1, []), noisy(0.013, 40, 2), 10.0, min_runs=1).kind == "regression"  # type: ignore[union-attr]


def test_unchanged_means_tested_and_states_what_it_could_detect() -> None:
    verdict = compare_metric(saved(0.010, 40, 1, QUIET_RUNS), noisy(0.0101, 40, 2), 10.0)
    assert verdict is not None and verdict.kind == "unchanged"
    assert verdict.detectable_pct is not None and 0 < verdict.detectable_pct < 100
    assert "smallest change this test could detect" in verdict.message


def test_no_finite_sample_is_inconclusive() -> None:
    verdict = compare_metric(saved(0.010, 10, 1, QUIET_RUNS), MetricResult.of("step_time_s", [float("nan")] * 10), 10.0)
    assert verdict is not None and verdict.kind == "inconclusive" and "no finite current samples" in verdict.message


def test_fractions_move_by_percentage_points() -> None:
    base = saved(0.20, 40, 1, [0.20, 0.201, 0.199, 0.20], "exposed_comm_fraction")
    small = compare_metric(base, noisy(0.215, 40, 2, "exposed_comm_fraction"), 10.0)  # +7.5 % but +1.5 pp
    assert small is not None and small.kind == "unchanged" and "pp" in small.change
    large = compare_metric(base, noisy(0.35, 40, 2, "exposed_comm_fraction"), 10.0)  # +15 pp
    assert large is not None and large.kind == "regression" and large.change.endswith("pp worse")
    assert large.change.startswith("+14.") or large.change.startswith("+15.")
    assert large.detectable_pct is not None and large.detectable_pct < 2.0  # in points: a fraction of 0.2 moves


def test_exact_counts_are_judged_by_the_threshold_and_memory_peaks_by_the_saved_runs() -> None:
    before, after = MetricResult.of("comm_bytes_per_step", [4e6]), MetricResult.of("comm_bytes_per_step", [4.8e6])
    grew = compare_metric(before, after, 10.0)
    assert grew is not None and grew.kind == "regression" and grew.change == "+20.0 % larger"
    peak = compare_metric(MetricResult.of("peak_rss_mb", [400.0]), MetricResult.of("peak_rss_mb", [480.0]), 10.0)
    assert peak is not None and peak.kind == "inconclusive" and peak.untestable  # no saved spread: no test
    saved_peak = MetricResult.of("peak_rss_mb", [400.0])
    saved_peak.history = [401.0, 399.0, 400.0, 400.5]
    judged = compare_metric(saved_peak, MetricResult.of("peak_rss_mb", [480.0]), 10.0)
    assert judged is not None and judged.kind == "regression" and judged.change == "+20.0 % larger"


def test_a_figure_whose_unit_changed_is_inconclusive_not_compared() -> None:
    before = MetricResult.of("my_time", [1.0] * 10, unit="s", better="lower")
    before.history = [1.0, 1.0, 1.0]
    after = MetricResult.of("my_time", [1000.0] * 10, unit="ms", better="lower")
    verdict = compare_metric(before, after, 10.0)
    assert verdict is not None and verdict.kind == "inconclusive" and "unit changed from 's'" in verdict.message
    same_unit = MetricResult.of("my_time", [1000.0] * 10, unit="s", better="lower")
    assert compare_metric(before, same_unit, 10.0).kind == "regression"  # type: ignore[union-attr]
