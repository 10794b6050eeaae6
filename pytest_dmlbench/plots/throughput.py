"""Throughput per case (median with the interquartile range), and data-loader sweeps as lines.

A sweep is a case parametrized by ``num_workers`` and ``batch_size``: one line per batch size (and mode)
against the number of workers, with the point where more workers stop helping marked
(:func:`pytest_dmlbench.sweeps.loader.saturation_point`).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path

from pytest_dmlbench.plots.figure import MAX_BARS, Figure, Skipped, chunks, new_axes, numbered, save
from pytest_dmlbench.plots.series import labelled, latest, ordered, quartiles_of
from pytest_dmlbench.results import CaseResult, RunResults
from pytest_dmlbench.results.units import natural_key
from pytest_dmlbench.sweeps.loader import SATURATION_TOLERANCE, saturation_point

METRIC = "throughput_samples_per_s"
SWEEP_PARAMS = ("num_workers", "batch_size")


def draw(runs: Sequence[RunResults], out: Path) -> list[Figure] | Skipped:
    cases = [c for c in ordered(latest(runs).cases) if METRIC in c.metrics and c.metrics[METRIC].samples]
    if not cases:
        return Skipped("throughput", f"no case recorded {METRIC}")
    figures = []
    plain = [c for c in cases if not all(p in c.params for p in SWEEP_PARAMS)]
    groups = chunks(plain, MAX_BARS) if plain else []
    top = max((quartiles_of(c.metrics[METRIC].samples)[2] for c in plain), default=0.0)
    for index, group in enumerate(groups):
        title = "Training throughput per case"
        fig, ax = new_axes(title, "samples/s (median; bar: interquartile range)", "")
        labels = [labelled(c) for c in group]
        quartiles = [quartiles_of(c.metrics[METRIC].samples) for c in group]
        medians = [q[1] for q in quartiles]
        ax.barh(labels, medians, color="tab:green")
        ax.errorbar(medians, labels, xerr=[[q[1] - q[0] for q in quartiles], [q[2] - q[1] for q in quartiles]],
                    fmt="none", ecolor="black", capsize=3)
        ax.set_xlim(0, top * 1.05 if top > 0 else None)  # one scale across the figures of this family
        ax.invert_yaxis()
        figures.append(save(fig, out / numbered("throughput", index, len(groups)), title,
                            "global samples processed per second, median over rounds"))
    sweeps = [c for c in cases if all(p in c.params for p in SWEEP_PARAMS)]
    if sweeps:
        figures.append(_draw_sweep(sweeps, out))
    return figures


def sweep_lines(cases: Sequence[CaseResult]) -> dict[str, dict[int, float]]:
    """Line label (test, batch size, other parameters) -> {num_workers: median samples/s}."""
    lines: dict[str, dict[int, float]] = defaultdict(dict)
    for case in cases:
        params = dict(case.params)
        workers = int(params.pop("num_workers"))
        batch = params.pop("batch_size")
        name = case.nodeid.rsplit("::", 1)[-1].split("[")[0].removeprefix("test_")
        extra = " ".join(f"{k}={v}" for k, v in sorted(params.items()))
        label = f"{name} bs{batch}" + (f" {extra}" if extra else "")
        lines[label][workers] = case.metrics[METRIC].stats.median
    return {label: lines[label] for label in sorted(lines, key=natural_key)}


def _draw_sweep(cases: Sequence[CaseResult], out: Path) -> Figure:
    title = "Data loader: samples/s against num_workers"
    fig, ax = new_axes(title, "DataLoader num_workers", "samples/s (median)")
    for label, points in sweep_lines(cases).items():
        workers = sorted(points)
        values = [points[w] for w in workers]
        (line,) = ax.plot(workers, values, marker="o", label=label)
        knee = saturation_point(points)
        ax.plot([knee], [points[knee]], marker="*", markersize=14, color=line.get_color(), linestyle="none")
        ax.set_xticks(workers)
    ax.legend(fontsize="small")
    return save(fig, out / "loader-sweep.png", title,
                f"star: fewest workers within {SATURATION_TOLERANCE:.0%} of the line's best; "
                "more workers than that do not help on this machine")
