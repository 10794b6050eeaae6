"""The distribution of a case's rounds: one box per case over its headline metric, every round a dot."""

from __future__ import annotations

from pathlib import Path

from pytest_dmlbench.plots import rounds
from pytest_dmlbench.plots.figure import Skipped
from tests.plots.conftest import case, drawn, no_warnings, run


def test_every_round_is_a_dot_in_its_case_row(out: Path) -> None:
    fast = case("b/test_t.py::test_step[a]", step_time_s=[0.010, 0.011, 0.012, 0.030])
    slow = case("b/test_t.py::test_step[b]", step_time_s=[0.020, 0.021, 0.022])
    too_few = case("b/test_t.py::test_step[c]", step_time_s=[0.5, 0.6])
    with no_warnings():
        [figure] = drawn(rounds.draw([run(fast, slow, too_few)], out))
    assert figure.path.name == "rounds-step_time_s.png"
    [ax] = figure.drawing.axes
    assert [t.get_text() for t in ax.get_yticklabels()] == ["step[a] ws2 (n=4)", "step[b] ws2 (n=3)"]
    assert ax.get_xlabel().startswith("ms")
    dots = sorted(round(float(x), 6) for line in ax.get_lines() if line.get_marker() == "."
                  for x in line.get_xdata())
    assert dots == [10.0, 11.0, 12.0, 20.0, 21.0, 22.0, 30.0]


def test_no_case_with_enough_rounds_is_said(out: Path) -> None:
    result = rounds.draw([run(case("b/t.py::test_once", accuracy=[0.5]))], out)
    assert isinstance(result, Skipped) and "3 or more rounds" in result.reason
