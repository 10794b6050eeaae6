"""The distribution of each case's rounds (as pytest-benchmark's histogram): one box per case over the samples
of its headline metric (the figure its table line shows), every round drawn as a dot, one figure per metric.

Cases with fewer than :data:`MIN_ROUNDS` finite samples have no distribution to show and are left out.
"""

from __future__ import annotations

import inspect
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pytest_dmlbench.plots.figure import MAX_BARS, Figure, Skipped, chunks, new_axes, numbered, save
from pytest_dmlbench.plots.series import labelled, latest, ordered
from pytest_dmlbench.results import CaseResult, RunResults
from pytest_dmlbench.results.table import headline_metric
from pytest_dmlbench.results.units import scale_for

MIN_ROUNDS = 3


def distributions(run: RunResults) -> dict[str, list[tuple[CaseResult, list[float]]]]:
    """Headline metric name -> [(case, finite samples)] for the cases with at least :data:`MIN_ROUNDS`."""
    found: dict[str, list[tuple[CaseResult, list[float]]]] = defaultdict(list)
    for case in ordered(run.cases):
        metric = headline_metric(case)
        if metric is None:
            continue
        samples = [s for s in metric.samples if s == s]
        if len(samples) >= MIN_ROUNDS:
            found[metric.name].append((case, samples))
    return dict(sorted(found.items()))


def draw(runs: Sequence[RunResults], out: Path) -> list[Figure] | Skipped:
    import numpy as np

    run = latest(runs)
    by_metric = distributions(run)
    if not by_metric:
        return Skipped("rounds", f"no case recorded {MIN_ROUNDS} or more rounds of its headline metric")
    figures = []
    for name, entries in by_metric.items():
        unit = run_unit(entries)
        scale = scale_for(unit, float(np.median([s for _, samples in entries for s in samples])))
        groups = chunks(entries, MAX_BARS)
        for index, group in enumerate(groups):
            title = f"Rounds of {name}"
            fig, ax = new_axes(title, f"{scale.label or name} (dot: one round)", "")
            data = [[s * scale.factor for s in samples] for _, samples in group]
            positions = list(range(1, len(group) + 1))
            ax.boxplot(data, positions=positions, widths=0.6, showfliers=False, **horizontal(ax))
            jitter = np.random.default_rng(0)
            for y, values in zip(positions, data, strict=True):
                ax.plot(values, y + jitter.uniform(-0.18, 0.18, len(values)), marker=".", linestyle="none",
                        color="tab:blue", alpha=0.6)
            ax.set_yticks(positions, [f"{labelled(case)} (n={len(samples)})" for case, samples in group])
            ax.invert_yaxis()
            figures.append(save(fig, out / numbered(f"rounds-{name}", index, len(groups)), title,
                                "box: quartiles and median of the rounds, whiskers to 1.5 IQR; dots: every round "
                                "(spread vertically only to be seen)"))
    return figures


def horizontal(ax: Any) -> dict[str, Any]:
    """The keyword that lays a box plot on its side: ``orientation`` since matplotlib 3.10 (``vert`` is
    deprecated there), ``vert`` before."""
    accepted = inspect.signature(ax.boxplot).parameters
    return {"orientation": "horizontal"} if "orientation" in accepted else {"vert": False}


def run_unit(entries: Sequence[tuple[CaseResult, list[float]]]) -> str:
    """The unit the cases recorded their metric in (the first case's; one metric has one unit)."""
    case = entries[0][0]
    return next(m.unit for m in case.metrics.values() if m is headline_metric(case))
