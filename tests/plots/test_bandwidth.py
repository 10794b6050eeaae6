"""bandwidth.png always carries several labelled y ticks: a log axis only where the values span a decade."""

from __future__ import annotations

from pathlib import Path

from pytest_dmlbench.plots import bandwidth
from pytest_dmlbench.plots.figure import new_axes
from pytest_dmlbench.results import CaseResult
from tests.plots.conftest import case, drawn, no_warnings, run, y_ticks_in_view

MIN_TICKS = 3


def collectives(values: dict[str, float]) -> list[CaseResult]:
    return [case(f"b/test_coll.py::test_allreduce[{size}]", params={"op": "all_reduce", "size": size},
                 busbw_gbps=[v * 0.98, v, v * 1.02]) for size, v in values.items()]


def labelled_y_ticks(ax: object) -> list[str]:
    ax.figure.canvas.draw()  # type: ignore[attr-defined]
    low, high = sorted(ax.get_ylim())  # type: ignore[attr-defined]
    return [t.get_text() for t, v in zip(ax.get_yticklabels(), ax.get_yticks(), strict=True)  # type: ignore[attr-defined]
            if low <= v <= high and t.get_text()]


def test_less_than_a_decade_of_bandwidth_is_a_linear_axis_with_several_ticks(out: Path) -> None:
    with no_warnings():
        [figure] = drawn(bandwidth.draw([run(*collectives({"1MB": 1.4, "4MB": 2.1, "16MB": 2.6}))], out))
    [ax] = figure.drawing.axes
    assert ax.get_yscale() == "linear" and ax.get_ylim()[0] == 0
    assert len(labelled_y_ticks(ax)) >= MIN_TICKS, labelled_y_ticks(ax)
    assert [t.get_text() for t in ax.get_xticklabels()] == ["1MB", "4MB", "16MB"]
    assert "linear scale" in figure.caption


def test_more_than_a_decade_is_a_log_axis_with_several_labelled_ticks(out: Path) -> None:
    with no_warnings():
        [figure] = drawn(bandwidth.draw([run(*collectives({"4KB": 0.05, "1MB": 0.9, "16MB": 2.6}))], out))
    [ax] = figure.drawing.axes
    assert ax.get_yscale() == "log"
    assert len(labelled_y_ticks(ax)) >= MIN_TICKS, labelled_y_ticks(ax)


def test_tick_check_fails_on_a_default_log_axis_over_less_than_a_decade() -> None:
    """Negative control: the former axis (log scale, matplotlib's default ticks) over 1.4-2.6 GB/s shows
    fewer than the required ticks, so the tests above would catch its return."""
    _, ax = new_axes("", "", "")
    ax.plot([1, 2, 3], [1.4, 2.1, 2.6])
    ax.set_yscale("log")
    ax.minorticks_off()
    assert len(y_ticks_in_view(ax)) < MIN_TICKS
