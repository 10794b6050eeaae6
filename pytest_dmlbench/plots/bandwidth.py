"""Bus bandwidth against message size per collective, with the memory-copy ceiling.

Message sizes come from the cases' ``size`` (or ``nbytes``) parameter (``4KB``, ``16MB``; see
:func:`pytest_dmlbench.results.units.parse_size`); the ceiling is the median ``memcpy_gbps`` of the same run.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pytest_dmlbench.plots.figure import Figure, Skipped, new_axes, save
from pytest_dmlbench.plots.series import latest, median
from pytest_dmlbench.results import RunResults
from pytest_dmlbench.results.units import parse_size

SIZE_PARAMS = ("size", "nbytes", "message_size")
LOG_SPAN = 10.0
"""The y axis is logarithmic when the largest value is at least this many times the smallest."""


def message_bytes(params: dict[str, str]) -> tuple[float, str] | None:
    """(bytes, label) of a case's message size parameter, or None."""
    for name in SIZE_PARAMS:
        text = params.get(name)
        if text is None:
            continue
        value = float(text) if text.isdigit() else parse_size(text)
        if value is not None:
            return value, text
    return None


def busbw_series(run: RunResults) -> dict[str, list[tuple[float, str, float]]]:
    """(collective, world size) label -> [(bytes, size label, median busbw GB/s)], by size."""
    series: dict[str, list[tuple[float, str, float]]] = defaultdict(list)
    for case in run.cases:
        busbw = median(case, "busbw_gbps")
        size = message_bytes(case.params)
        if busbw is None or size is None:
            continue
        op = case.params.get("op") or case.params.get("collective") or "collective"
        series[f"{op} ws{case.world_size}"].append((size[0], size[1], busbw))
    return {label: sorted(points) for label, points in sorted(series.items())}


def draw(runs: Sequence[RunResults], out: Path) -> list[Figure] | Skipped:
    run = latest(runs)
    series = busbw_series(run)
    if not series:
        return Skipped("bandwidth", "no case recorded busbw_gbps with a message-size parameter "
                                    "(size=4KB ...): see bench_cases/test_collectives.py")
    title = "Bus bandwidth against message size"
    fig, ax = new_axes(title, "message size (as named by the case)", "busbw (GB/s, median)")
    ticks: dict[float, str] = {}
    for label, points in series.items():
        ax.plot([p[0] for p in points], [p[2] for p in points], marker="o", label=label)
        ticks.update({p[0]: p[1] for p in points})
    ceilings = [v for case in run.cases if (v := median(case, "memcpy_gbps")) is not None]
    caption = "busbw as nccl-tests defines it, median over rounds"
    values = [p[2] for points in series.values() for p in points]
    if ceilings:
        ceiling = max(ceilings)
        values.append(ceiling)
        ax.axhline(ceiling, color="black", linestyle="--", label=f"memory copy {ceiling:.3g} GB/s")
        caption += "; dashed: memory-copy bandwidth measured in the same run, the ceiling on one machine"
    else:
        caption += "; no memcpy_gbps case in this run, so no ceiling is drawn"
    ax.set_xscale("log", base=2)
    ax.set_xticks(sorted(ticks), [ticks[k] for k in sorted(ticks)])
    ax.minorticks_off()
    caption += "; " + bandwidth_axis(ax, values)
    ax.legend(fontsize="small")
    return [save(fig, out / "bandwidth.png", title, caption)]


def bandwidth_axis(ax: Any, values: Sequence[float]) -> str:
    """Scale the y axis so it always carries several labelled ticks: logarithmic (ticks at 1, 2 and 5 of
    each decade) when the values span a decade or more, else linear from zero. The caption's wording."""
    from matplotlib.ticker import LogLocator, MaxNLocator, NullLocator, StrMethodFormatter

    positive = [v for v in values if v > 0]
    if len(positive) >= 2 and max(positive) / min(positive) >= LOG_SPAN:
        ax.set_yscale("log")
        ax.yaxis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
        ax.yaxis.set_major_formatter(StrMethodFormatter("{x:.3g}"))
        ax.yaxis.set_minor_locator(NullLocator())
        return "log scale (the values span a decade or more)"
    ax.set_ylim(0, max(positive, default=1.0) * 1.1)
    ax.yaxis.set_major_locator(MaxNLocator(nbins=6))
    return "linear scale from zero (the values span less than a decade)"
