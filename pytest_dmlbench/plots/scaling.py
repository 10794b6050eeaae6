"""Speedup and scaling efficiency against world size per strategy, with the ideal line.

A series is one case at several world sizes: a ``scaling=True`` case (ids ``ws1``, ``ws2``, ...) in one
results file, or the same case in results files run at different ``--world-size``. Speedup is
throughput(N) / throughput(N0) with N0 the smallest world size measured (1 when present), so the ideal is
N / N0; efficiency is speedup / (N / N0).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path

from pytest_dmlbench.plots.figure import Figure, Skipped, chunks, new_figure, numbered, save, style
from pytest_dmlbench.plots.series import median, series_label, world_size_of
from pytest_dmlbench.results import RunResults

METRIC = "throughput_samples_per_s"
SUPERLINEAR = 1.10
"""Efficiency above this (110 %) is flagged: more than linear speedup on one machine almost always means the
base measurement (the smallest world size) was slow, not that the extra ranks did better than ideal."""


def scaling_series(runs: Sequence[RunResults]) -> dict[str, dict[int, float]]:
    """Series label -> {world size: median throughput}; later runs win; series with >= 2 sizes only."""
    points: dict[str, dict[int, float]] = defaultdict(dict)
    for run in runs:
        for case in run.cases:
            value = median(case, METRIC)
            if value is not None and value > 0:
                points[series_label(case)][world_size_of(case)] = value
    return {label: sizes for label, sizes in sorted(points.items()) if len(sizes) >= 2}


def draw(runs: Sequence[RunResults], out: Path) -> list[Figure] | Skipped:
    from matplotlib.ticker import PercentFormatter

    series = scaling_series(runs)
    if not series:
        return Skipped("scaling", "no case was measured at two or more world sizes: use a scaling=True case, "
                                  "or pass results files run at different --world-size")
    figures = []
    groups = chunks(sorted(series))
    for index, labels in enumerate(groups):
        fig, (left, right) = new_figure(2)
        style(left, "speedup", "world size (ranks)", "speedup (x)")
        style(right, "scaling efficiency", "world size (ranks)", "efficiency (%)")
        right.yaxis.set_major_formatter(PercentFormatter(xmax=1.0))
        biggest = 1
        flagged: list[str] = []
        peak = 0.0
        for label in labels:
            sizes = sorted(series[label])
            base_n, base = sizes[0], series[label][sizes[0]]
            speedup = [series[label][n] / base for n in sizes]
            efficiency = [s / (n / base_n) for s, n in zip(speedup, sizes, strict=True)]
            left.plot(sizes, speedup, marker="o", label=label)
            right.plot(sizes, efficiency, marker="o", label=label)
            peak = max(peak, *efficiency)
            for n, value, fast in zip(sizes, efficiency, speedup, strict=True):
                if value > SUPERLINEAR:
                    flagged.append(f"{label} at {n}: {value:.0%}")
                    left.plot([n], [fast], marker="X", markersize=12, color="tab:red", linestyle="none")
                    right.plot([n], [value], marker="X", markersize=12, color="tab:red", linestyle="none")
                    right.annotate(f"{value:.0%} > ideal", (n, value), textcoords="offset points", xytext=(-4, 6),
                                   ha="right", fontsize="small", color="tab:red")
            biggest = max(biggest, sizes[-1])
        ideal = list(range(1, biggest + 1))
        left.plot(ideal, ideal, linestyle="--", color="black", label="ideal (N / N0)")
        right.axhline(1.0, linestyle="--", color="black", label="ideal")
        right.set_ylim(0, max(1.2, peak * 1.15))  # the ideal and every point in view, from zero
        left.legend(fontsize="small")
        left.set_xticks(ideal)
        right.set_xticks(ideal)
        title = "Speedup and scaling efficiency"
        fig.suptitle(title)
        figures.append(save(fig, out / numbered("scaling", index, len(groups)), title,
                            "throughput(N) / throughput(N0) per case (N0: smallest world size measured); "
                            "dashed: ideal linear scaling" + superlinear_note(flagged)))
    return figures


def superlinear_note(flagged: Sequence[str]) -> str:
    """The caption's warning about efficiencies above :data:`SUPERLINEAR` (empty when there are none)."""
    if not flagged:
        return ""
    return (f"; red X: efficiency above ideal ({'; '.join(flagged)}), which one machine cannot deliver: the "
            "smallest world size was probably measured slow (noise, or another run sharing the cores), so "
            "these speedups are overstated")
