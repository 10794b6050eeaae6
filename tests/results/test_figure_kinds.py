"""Which figure saw it: every verdict, the table's notable lines and the reports name the kind of figure that
decided (wall time, CPU time, a work counter, a memory peak) and the message says what that kind cannot see."""

from __future__ import annotations

from pytest_dmlbench.gates.stored.compare import CompareSettings, compare_run
from pytest_dmlbench.gates.thresholds import Thresholds
from pytest_dmlbench.plots.verdict_html import verdict_list
from pytest_dmlbench.results import MetricResult, RunResults
from pytest_dmlbench.results.figures import figure_kind, labelled, seen_by
from pytest_dmlbench.results.report import markdown_summary, terminal_table
from tests.results.casefactory import make_case, make_run

CPU_BLIND = "CPU time, which misses waiting: a slower peer, lost overlap, an added barrier or sleep, I/O"


def test_each_figure_names_its_kind_and_what_it_cannot_see() -> None:
    assert figure_kind("step_time_s") == figure_kind("throughput_samples_per_s") == "wall time"
    assert figure_kind("collective_calls_per_step.all_reduce") == figure_kind("flops_per_step") == "work counter"
    assert figure_kind("peak_rss_mb") == "memory peak"
    assert seen_by("cpu_time_s").startswith(CPU_BLIND)
    assert seen_by("comm_bytes_per_step").startswith("a work counter, which counts exactly and misses speed")
    assert seen_by("step_time_s") == "wall time, which sees everything, the neighbours on a shared machine too"
    # negative control: a user's own figure is of no known kind, and nothing is claimed for it
    assert figure_kind("my_loss") == "other" and seen_by("my_loss") == "" and labelled("my_loss") == "my_loss"


def _judged() -> RunResults:
    """A case whose CPU time and all_reduce calls regressed, its wall time did not change, and a user figure."""
    base, current = make_case("bench_cases/test_x.py::test_y", 0.010, seed=1), make_case(
        "bench_cases/test_x.py::test_y", 0.010, seed=1)
    for case, cpu, calls in ((base, 0.010, 1.0), (current, 0.020, 2.0)):
        case.add(MetricResult.of("cpu_time_s", [cpu * (1 + 0.001 * i) for i in range(20)]))
        case.add(MetricResult.of("collective_calls_per_step", [calls] * 20))
        case.add(MetricResult.of("collective_calls_per_step.all_reduce", [calls] * 20))
        case.add(MetricResult.of("my_loss", [calls] * 20, "nats", "lower"))
    return compare_run(make_run([base]), make_run([current]), CompareSettings(min_runs=1), Thresholds(10.0, 5.0))


def test_the_verdicts_table_and_reports_say_which_figure_saw_the_change() -> None:
    results = _judged()
    verdicts = {v.metric: v for v in results.cases[0].verdicts}
    assert verdicts["cpu_time_s"].kind == "regression"
    assert f"seen by {CPU_BLIND}" in verdicts["cpu_time_s"].message
    assert "seen by a work counter, which counts exactly" in verdicts["collective_calls_per_step.all_reduce"].message
    assert verdicts["my_loss"].kind == "regression" and "seen by" not in verdicts["my_loss"].message
    table = terminal_table(results, width=120)
    assert "REGRESSION cpu_time_s (CPU time)" in table
    assert "REGRESSION collective_calls_per_step.all_reduce (work counter)" in table
    assert "REGRESSION my_loss:" in table  # no kind named for a figure of no known kind
    summary = markdown_summary(results)
    assert "### regression: `bench_cases/test_x.py::test_y` cpu_time_s (CPU time)" in summary
    assert "collective_calls_per_step.all_reduce (work counter)" in verdict_list(results)
