"""Proof of no change in the stored gate: ``unchanged`` only when both change intervals lie within the band."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from scipy import stats

from pytest_dmlbench.baseline.store import read_baseline_file
from pytest_dmlbench.gates.stored.between_runs import (
    HISTORY_RUNS,
    between_run_test,
    half_width_floor,
    prediction_half_width,
)
from pytest_dmlbench.gates.stored.compare import compare_metric
from pytest_dmlbench.gates.stored.proof import (
    ChangeInterval,
    between_runs_interval,
    saves_to_settle,
    threshold_band,
    within_run_interval,
)
from pytest_dmlbench.gates.stored.significance import block_samples
from pytest_dmlbench.results import MetricResult
from pytest_dmlbench.results.stats import median
from tests.results.casefactory import step_samples

SPREAD_5_6 = math.log(1.056)  # a run-to-run spread of 5.6 %, as verdicts state it (exp(sd) - 1)


def baseline_with_spread(level: float, log_spread: float, runs: int, seed: int = 1) -> MetricResult:
    """A timed baseline of 40 quiet rounds whose ``runs`` saved runs' log medians have exactly ``log_spread``
    as their standard deviation and the newest run's median as their mean."""
    metric = MetricResult.of("step_time_s", step_samples(level, 40, seed, spread=0.005))
    newest = median(metric.samples)
    offsets = {3: [-1.0, 1.0], 5: [-1.0, -1.0, 1.0, 1.0]}[runs]  # with the newest run's 0: sd 1
    metric.history = [newest * math.exp(o * log_spread) for o in offsets]
    return metric


def current(level: float, seed: int = 2) -> MetricResult:
    return MetricResult.of("step_time_s", step_samples(level, 40, seed, spread=0.005))


def test_the_half_widths_the_docs_state() -> None:
    """docs/explanation/statistics.md, "The stored-baseline gate": at a spread of 5.6 % the between-runs
    interval reaches 0.44 in log units (+55 % / -35 %) with 3 saves, 0.22 (+25 % / -20 %) with 5, and never
    falls below z(0.99) x s = 0.127 (+13.5 % / -11.9 %), wider than a 10 % band."""
    def pct(half: float) -> tuple[float, float]:
        return round(100 * math.expm1(half)), round(100 * -math.expm1(-half))

    assert [round(prediction_half_width(SPREAD_5_6, n, 0.01), 2) for n in (3, 5)] == [0.44, 0.22]
    assert round(half_width_floor(SPREAD_5_6, 0.01), 3) == 0.127 and round(half_width_floor(1.0, 0.01), 2) == 2.33
    assert pct(prediction_half_width(SPREAD_5_6, 3, 0.01)) == (55, 35)
    assert pct(prediction_half_width(SPREAD_5_6, 5, 0.01)) == (25, 20)
    assert 100 * math.expm1(half_width_floor(SPREAD_5_6, 0.01)) == pytest.approx(13.5, abs=0.05)
    assert 100 * -math.expm1(-half_width_floor(SPREAD_5_6, 0.01)) == pytest.approx(11.9, abs=0.05)
    assert 2 * half_width_floor(SPREAD_5_6, 0.01) > math.log(1.1) - math.log(0.9)  # never fits a 10 % band
    assert prediction_half_width(SPREAD_5_6, 50, 0.01) > half_width_floor(SPREAD_5_6, 0.01) > math.log1p(0.10)


def test_the_prediction_interval_is_the_textbook_one() -> None:
    medians = [0.0100, 0.0104, 0.0097, 0.0102, 0.0099]
    logs = [math.log(m) for m in medians]
    test = between_run_test(medians, 0.0110, "greater")
    assert test is not None
    interval = between_runs_interval(test, 0.01, 0.0110)
    half = stats.t.ppf(0.99, 4) * stats.tstd(logs) * math.sqrt(1 + 1 / 5)
    assert interval.centre == pytest.approx(math.log(0.0110) - sum(logs) / 5)
    assert interval.half_width == pytest.approx(half)
    assert interval.reference == pytest.approx(math.exp(sum(logs) / 5))
    # the interval's lower bound lies above zero exactly when the one-sided test is significant at alpha
    assert (interval.low > 0) == (test.p_value < 0.01)
    assert half_width_floor(0.05, 0.01) == pytest.approx(stats.norm.ppf(0.99) * 0.05)


def test_the_within_run_interval_is_the_two_sample_t_one() -> None:
    base, cur = step_samples(0.010, 40, 1), step_samples(0.011, 40, 2)
    blocks = block_samples(base, cur)
    assert blocks is not None and blocks.log_scale
    interval = within_run_interval(blocks, 0.01, median(base))
    fit = stats.ttest_ind(blocks.current, blocks.baseline)
    se = (sum(blocks.current) / 8 - sum(blocks.baseline) / 8) / fit.statistic
    assert interval.half_width == pytest.approx(stats.t.ppf(0.99, 14) * se)


def test_the_band_on_each_scale() -> None:
    assert threshold_band(10.0, "s", True, 1.0) == pytest.approx((math.log(0.9), math.log(1.1)))
    assert threshold_band(10.0, "fraction", False, 0.2) == (-0.1, 0.1)
    low, high = threshold_band(10.0, "fraction", True, 0.2)  # points about 0.2, on the log scale
    assert (0.2 * math.expm1(low), 0.2 * math.expm1(high)) == pytest.approx((-0.1, 0.1))
    assert threshold_band(150.0, "s", True, 1.0)[0] == -math.inf  # nothing falls by 150 %
    assert threshold_band(10.0, "ratio", False, -4.0) == pytest.approx((-0.4, 0.4))


def test_within_clear_and_relation() -> None:
    band = math.log(1.1)
    inside = ChangeInterval("between runs", 0.0, band / 2, True, 1.0)
    across = ChangeInterval("between runs", band, band / 2, True, 1.0)
    wide = ChangeInterval("between runs", 0.0, 2 * band, True, 1.0)
    beyond = ChangeInterval("between runs", 3 * band, band / 2, True, 1.0)
    assert inside.within(10.0, "s") and inside.clear(10.0, "s")
    assert not across.within(10.0, "s") and not across.clear(10.0, "s")
    assert not wide.within(10.0, "s") and not wide.clear(10.0, "s")
    assert not beyond.within(10.0, "s") and beyond.clear(10.0, "s")
    assert [i.relation(10.0, "s") for i in (inside, across, wide, beyond)] == [
        "inside the threshold band", "across a threshold", "wider than the threshold band", "beyond the threshold"]
    assert inside.describe(10.0, "s") == "[-4.7 %, +4.9 %] between runs, inside the threshold band"


def test_inside_the_band_is_unchanged_and_states_both_intervals() -> None:
    verdict = compare_metric(baseline_with_spread(0.010, 0.005, 3), current(0.0102), 10.0)
    assert verdict is not None and verdict.kind == "unchanged", verdict and verdict.message
    assert "change intervals (98 %) [" in verdict.message
    assert "within the run, inside the threshold band, and [" in verdict.message
    assert "between runs, inside the threshold band" in verdict.message
    # negative control: the same figures against saved runs that differ by 5.6 % are not proven
    wide = compare_metric(baseline_with_spread(0.010, SPREAD_5_6, 3), current(0.0102), 10.0)
    assert wide is not None and wide.kind == "inconclusive" and wide.inconclusive_cause == "unsettled"


def test_straddling_is_unsettled_with_the_interval_and_the_saves_that_would_settle_it() -> None:
    verdict = compare_metric(baseline_with_spread(0.010, 0.02, 3), current(0.010), 10.0,
                             refresh_command="pytest --dmlbench t.py::x --dmlbench-save")
    assert verdict is not None
    # negative control of the old rule: not a regression, both tests p >= alpha, so it said "unchanged"
    assert verdict.kind != "unchanged"
    assert verdict.p_value is not None and verdict.p_value >= 0.01
    assert verdict.between_runs_p is not None and verdict.between_runs_p >= 0.01
    assert verdict.kind == "inconclusive" and verdict.inconclusive_cause == "unsettled"
    assert verdict.message.startswith("step_time_s inconclusive (tested, not settled) against the baseline: ")
    assert "[-1" in verdict.message and "between runs, wider than the threshold band" in verdict.message
    assert ("5 saved runs would settle it at this spread (save it 2 more times: "
            "pytest --dmlbench t.py::x --dmlbench-save)") in verdict.message
    assert "smallest change this test could detect: " in verdict.message
    # and they would: the same figures against 5 saved runs of that spread are proven unchanged
    settled = compare_metric(baseline_with_spread(0.010, 0.02, 5), current(0.010), 10.0)
    assert settled is not None and settled.kind == "unchanged", settled and settled.message


def test_beyond_the_threshold_is_a_regression() -> None:
    verdict = compare_metric(baseline_with_spread(0.010, 0.005, 3), current(0.013), 10.0)
    assert verdict is not None and verdict.kind == "regression"
    # negative control: the same rise within a wide spread is not a regression, nor proven unchanged
    wide = compare_metric(baseline_with_spread(0.010, 0.2, 3), current(0.013), 10.0)
    assert wide is not None and wide.kind == "inconclusive" and wide.inconclusive_cause == "unsettled"


def test_a_spread_too_wide_for_any_number_of_saves_says_so_and_points_to_the_paired_gate() -> None:
    verdict = compare_metric(baseline_with_spread(0.010, SPREAD_5_6, 3), current(0.010), 10.0)
    assert verdict is not None and verdict.kind == "inconclusive" and verdict.inconclusive_cause == "unsettled"
    assert ("no number of saved runs can settle it at this spread: the between-runs half-width never falls "
            "below z(0.99) x spread = 13.5 %") in verdict.message
    assert "the paired gate (--dmlbench-against REF)" in verdict.message
    assert "saved runs would settle it" not in verdict.message
    # negative control: at a 2 % spread a number of saves does settle it
    quiet = compare_metric(baseline_with_spread(0.010, 0.02, 3), current(0.010), 10.0)
    assert quiet is not None and "no number of saved runs" not in quiet.message


def test_more_saves_than_a_baseline_keeps_point_to_the_paired_gate() -> None:
    verdict = compare_metric(baseline_with_spread(0.010, 0.036, 3), current(0.010), 10.0)
    assert verdict is not None and verdict.kind == "inconclusive"
    assert f"saved runs, more than the {HISTORY_RUNS} a baseline keeps" in verdict.message
    assert "--dmlbench-against REF" in verdict.message


def test_saves_to_settle_is_the_fewest_that_clear_the_band() -> None:
    test = between_run_test([0.01 * math.exp(o * 0.02) for o in (-1, 0, 1)], 0.01, "greater")
    assert test is not None and test.runs == 3
    band = threshold_band(10.0, "s", True, 1.0)
    runs = saves_to_settle(test, 0.01, band)
    assert runs == 5
    assert prediction_half_width(0.02, runs, 0.01) < band[1] < prediction_half_width(0.02, runs - 1, 0.01)
    wide = between_run_test([0.01 * math.exp(o * SPREAD_5_6) for o in (-1, 0, 1)], 0.01, "greater")
    assert wide is not None and saves_to_settle(wide, 0.01, band) is None
    moved = between_run_test([0.01 * math.exp(o * 0.02) for o in (-1, 0, 1)], 0.013, "greater")
    assert moved is not None and saves_to_settle(moved, 0.01, band) is not None  # clear beyond, in time


def test_a_within_run_interval_too_wide_asks_for_more_rounds() -> None:
    base = MetricResult.of("step_time_s", step_samples(0.010, 20, 1, spread=0.15))
    base.history = [median(base.samples)] * 4  # saved runs alike: the between-runs part is narrow
    verdict = compare_metric(base, MetricResult.of("step_time_s", step_samples(0.010, 20, 2, spread=0.15)), 10.0)
    assert verdict is not None and verdict.kind == "inconclusive" and verdict.inconclusive_cause == "unsettled"
    assert "within the run, wider than the threshold band" in verdict.message
    assert "more rounds would narrow the within-run interval (20 baseline and 20 current rounds now)" in verdict.message
    assert "saved runs would settle it" not in verdict.message


OLD_BASELINE = {  # a baseline file as pytest-dmlbench wrote it before this rule (schema 2)
    "schema": 2,
    "machine": {"cpu_model": "Intel(R) Xeon(R) Processor", "logical_cores": 2, "memory_gib": 24, "os": "Linux",
                "kernel": "6.1.0", "machine": "x86_64", "python": "3.11.9", "torch": "2.14.1+cpu", "cuda": None,
                "nccl": None, "gpus": [], "backend": "gloo", "cpu_mhz": 2300.0},
    "created": "2026-11-22T10:00:00+00:00",
    "run": {"world_size": 4, "launcher": "fork", "isolation": "persistent", "identity": "ws4-gloo-fork-persistent"},
    "cases": [{
        "nodeid": "t.py::x", "params": {}, "world_size": 4, "backend": "gloo", "outcome": "passed",
        "threshold_pct": None, "verdicts": [], "extra": {},
        "metrics": {
            "step_time_s": {"unit": "s", "better": "lower",
                            "samples": [0.0100 + 0.00001 * ((7 * i) % 5) for i in range(40)]},
            "peak_rss_mb": {"unit": "MB", "better": "lower", "samples": [512.0]},
            "comm_bytes_per_step": {"unit": "bytes", "better": "lower", "samples": [4194304.0]},
        },
    }],
}


@pytest.mark.parametrize("history", [None, [0.01002, 0.01001, 0.01003, 0.01002]])
def test_baseline_files_saved_before_this_rule_load_and_are_judged_by_it(tmp_path: Path,
                                                                          history: list[float] | None) -> None:
    document = json.loads(json.dumps(OLD_BASELINE))
    if history is not None:
        for name in ("step_time_s", "peak_rss_mb"):
            document["cases"][0]["metrics"][name]["history"] = history if name == "step_time_s" else [512.0] * 4
    path = tmp_path / "x.json"
    path.write_text(json.dumps(document))
    (case,) = read_baseline_file(path).cases
    timed = MetricResult.of("step_time_s", [0.0100 + 0.00001 * ((3 * i) % 5) for i in range(40)])
    kinds = {name: compare_metric(case.metrics[name], cur, 10.0)
             for name, cur in (("step_time_s", timed), ("peak_rss_mb", MetricResult.of("peak_rss_mb", [512.0])),
                               ("comm_bytes_per_step", MetricResult.of("comm_bytes_per_step", [4194304.0])))}
    found = {name: (v.kind, v.inconclusive_cause) for name, v in kinds.items() if v is not None}
    if history is None:  # one saved run: timings and peaks untestable, the exact count compared exactly
        assert found == {"step_time_s": ("inconclusive", "untestable"), "peak_rss_mb": ("inconclusive", "untestable"),
                         "comm_bytes_per_step": ("unchanged", None)}
    else:  # five saved runs within 0.2 %: proven unchanged
        assert found == {"step_time_s": ("unchanged", None), "peak_rss_mb": ("unchanged", None),
                         "comm_bytes_per_step": ("unchanged", None)}
