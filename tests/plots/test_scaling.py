"""scaling.png flags an efficiency above ideal instead of drawing it as if it were real."""

from __future__ import annotations

from pathlib import Path

from pytest_dmlbench.plots import scaling
from pytest_dmlbench.results import RunResults
from tests.plots.conftest import case, drawn, no_warnings, run


def scaling_run(at_two: float) -> list[RunResults]:
    """One strategy at world sizes 1 and 2 (throughput 100 at one rank, ``at_two`` at two)."""
    return [run(*(case(f"b/test_scale.py::test_weak[ddp-ws{n}]", world_size=n, params={"scaling": str(n)},
                       throughput_samples_per_s=[v * 0.99, v, v * 1.01]) for n, v in ((1, 100.0), (2, at_two))))]


def flags(ax: object) -> list[str]:
    return [text.get_text() for text in ax.texts if "ideal" in text.get_text()]  # type: ignore[attr-defined]


def crosses(ax: object) -> list[tuple[float, float]]:
    """(x, y) of every red X marker."""
    return [(float(line.get_xdata()[0]), round(float(line.get_ydata()[0]), 6))
            for line in ax.get_lines() if line.get_marker() == "X"]  # type: ignore[attr-defined]


def test_superlinear_efficiency_is_flagged_on_the_figure_and_in_the_caption(out: Path) -> None:
    with no_warnings():
        [figure] = drawn(scaling.draw(scaling_run(700.0), out))
    speedup_ax, efficiency_ax = figure.drawing.axes
    assert flags(efficiency_ax) == ["350% > ideal"]
    assert crosses(efficiency_ax) == [(2.0, 3.5)] and crosses(speedup_ax) == [(2.0, 7.0)]
    assert "efficiency above ideal" in figure.caption and "350%" in figure.caption
    assert efficiency_ax.get_ylim()[1] >= 3.5 * 1.1, "the flagged point must be in view"


def test_efficiency_below_ideal_is_not_flagged(out: Path) -> None:
    with no_warnings():
        [figure] = drawn(scaling.draw(scaling_run(190.0), out))
    speedup_ax, efficiency_ax = figure.drawing.axes
    assert flags(efficiency_ax) == [] and "above ideal" not in figure.caption
    assert crosses(efficiency_ax) == [] == crosses(speedup_ax)
    assert efficiency_ax.get_ylim() == (0.0, 1.2)
