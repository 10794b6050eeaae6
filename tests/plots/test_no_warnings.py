"""Rendering every figure family of a real run (and of a trend) raises no warning that could reach a user's
pytest summary."""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_dmlbench.plots import render
from pytest_dmlbench.plots.figure import new_axes
from pytest_dmlbench.results.report import read_results
from tests.plots.conftest import no_warnings

STORED = Path(__file__).parent / "data" / "results.json"


def test_rendering_a_real_run_and_its_trend_warns_nothing(tmp_path: Path) -> None:
    first, second = read_results(STORED), read_results(STORED)
    second.created = "2026-11-24T10:00:00+00:00"
    with no_warnings():
        report = render([("first", first), ("second", second)], tmp_path)
    assert report.figures and all(f.path.exists() for f in report.figures)


def test_the_guard_turns_matplotlibs_empty_legend_warning_into_an_error() -> None:
    """Negative control: the warning the former training figure raised is caught by the guard."""
    _, ax = new_axes("", "", "")
    with no_warnings(), pytest.raises(UserWarning, match="No artists with labels"):
        ax.legend()
