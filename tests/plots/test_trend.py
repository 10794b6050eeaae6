"""Trend figures: x ticks name each run's commit and date, the verdict threshold is a shaded band around the
reference, and a wobble well inside the threshold stays small instead of filling the axes."""

from __future__ import annotations

from pathlib import Path

from pytest_dmlbench.plots import trend
from pytest_dmlbench.plots.figure import new_axes
from pytest_dmlbench.results import RunResults
from tests.plots.conftest import case, drawn, no_warnings, run, verdict

NODE = "b/test_train.py::test_step[ddp]"


def band_extents(ax: object) -> list[tuple[float, float]]:
    """(low, high) in data units of every patch labelled as a threshold band."""
    bands = []
    for patch in ax.patches:  # type: ignore[attr-defined]
        if "threshold" in patch.get_label():
            extents = patch.get_path().transformed(patch.get_patch_transform()).get_extents()
            bands.append((round(extents.y0, 6), round(extents.y1, 6)))
    return bands


def wobble_runs() -> list[RunResults]:
    """Three runs of one case, 1 % apart; the last compared with the second (unchanged)."""
    first = run(case(NODE, step_time_s=[1.00, 1.00, 1.00]), created="2026-11-20T09:00:00+00:00",
                commit="aaaaaaa1111")
    second = run(case(NODE, step_time_s=[1.01, 1.01, 1.01]), created="2026-11-21T09:30:00+00:00",
                 commit="bbbbbbb2222")
    third_case = case(NODE, step_time_s=[1.00, 1.00, 1.00])
    third_case.verdicts = [verdict("step_time_s", "unchanged", 1.01, 1.00, threshold_pct=5.0)]
    third = run(third_case, created="2026-11-22T10:15:00+00:00", commit="ccccccc3333")
    return [first, second, third]


def test_runs_are_named_by_commit_and_date_with_the_threshold_band(out: Path) -> None:
    with no_warnings():
        [figure] = drawn(trend.draw(wobble_runs(), out))
    [ax] = figure.drawing.axes
    labels = [t.get_text() for t in ax.get_xticklabels()]
    assert labels == ["aaaaaaa\n2026-11-20 09:00", "bbbbbbb\n2026-11-21 09:30", "ccccccc\n2026-11-22 10:15"]
    assert band_extents(ax) == [(0.95, 1.05)]
    [line] = [line for line in ax.get_lines() if line.get_label() == "step[ddp] ws2"]
    assert [round(y, 4) for y in line.get_ydata()] == [round(1 / 1.01, 4), 1.0, round(1 / 1.01, 4)]
    assert "threshold (5 %)" in figure.caption


def test_a_wobble_inside_the_threshold_does_not_fill_the_axes(out: Path) -> None:
    [figure] = drawn(trend.draw(wobble_runs(), out))
    low, high = figure.drawing.axes[0].get_ylim()
    assert low <= 0.90 and high >= 1.10, (low, high)


def test_zoom_check_fails_on_matplotlib_autoscale() -> None:
    """Negative control: autoscaled, the same 1 % wobble fills the axes and fails the range check above."""
    _, ax = new_axes("", "", "")
    ax.plot([0, 1, 2], [0.99, 1.0, 0.99])
    low, high = ax.get_ylim()
    assert not (low <= 0.90 and high >= 1.10)


def test_earlier_saves_of_a_baseline_come_first_and_say_so(out: Path) -> None:
    stored = case(NODE, step_time_s=[1.0, 1.0, 1.0])
    stored.metrics["step_time_s"].history = [0.97, 0.99]
    current = case(NODE, step_time_s=[1.3, 1.3, 1.3])
    current.verdicts = [verdict("step_time_s", "regression", 1.0, 1.3)]
    with no_warnings():
        [figure] = drawn(trend.draw([run(stored, commit="abcdef0"), run(current, created="2026-11-23T08:00:00+00:00")],
                                    out))
    [ax] = figure.drawing.axes
    assert [t.get_text() for t in ax.get_xticklabels()] == ["save -2", "save -1", "abcdef0\n2026-11-22 10:00",
                                                            "2026-11-23 08:00"]
    low, high = ax.get_ylim()
    assert high > 1.3 and low <= 0.9
