"""Plots of results files and a self-contained ``report.html`` (``python -m pytest_dmlbench plot`` and
``--dmlbench-plots DIR``). One module per figure family; each draws from a list of runs, oldest first."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from pytest_dmlbench.errors import PlotsUnavailable
from pytest_dmlbench.plots.figure import Figure, Skipped, pyplot
from pytest_dmlbench.results import RunResults

__all__ = ["PlotsUnavailable", "Report", "render"]

FAMILIES = ("scaling", "communication", "throughput", "bandwidth", "training", "rounds", "trend")


@dataclass(frozen=True)
class Report:
    """What :func:`render` wrote."""

    html: Path
    figures: list[Figure]
    skipped: list[Skipped]


def render(runs: Sequence[tuple[str, RunResults]], out: Path) -> Report:
    """Draw every figure family for ``runs`` (label, results; oldest first) into ``out`` and write
    ``out/report.html``. Single-run figures describe the last run; trends use all of them."""
    if not runs:
        raise ValueError("render needs at least one results file")
    pyplot()  # a clear PlotsUnavailable before anything is written
    from pytest_dmlbench.plots import bandwidth, communication, rounds, scaling, throughput, training, trend
    from pytest_dmlbench.plots.html import write_html

    out.mkdir(parents=True, exist_ok=True)
    results = [run for _, run in runs]
    figures: list[Figure] = []
    skipped: list[Skipped] = []
    for module in (scaling, communication, throughput, bandwidth, training, rounds, trend):
        drawn = module.draw(results, out)
        if isinstance(drawn, Skipped):
            skipped.append(drawn)
        else:
            figures.extend(drawn)
    page = write_html(out / "report.html", [label for label, _ in runs], results, figures, skipped)
    return Report(page, figures, skipped)
