"""Bus bandwidth against message size per collective, with the memory-copy ceiling.

Message sizes come from the cases' ``size`` (or ``nbytes``) parameter (``4KB``, ``16MB``; see
:func:`pytest_dmlbench.units.parse_size`); the ceiling is the median ``memcpy_gbps`` of the same run.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path

from pytest_dmlbench.plots.figure import Figure, Skipped, new_axes, save
from pytest_dmlbench.plots.series import latest, median
from pytest_dmlbench.results import RunResults
from pytest_dmlbench.units import parse_size

SIZE_PARAMS = ("size", "nbytes", "message_size")


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
    fig, ax = new_axes(title, "message size (as named by the case)", "busbw (GB/s, median, log scale)")
    ticks: dict[float, str] = {}
    for label, points in series.items():
        ax.plot([p[0] for p in points], [p[2] for p in points], marker="o", label=label)
        ticks.update({p[0]: p[1] for p in points})
    ceilings = [v for case in run.cases if (v := median(case, "memcpy_gbps")) is not None]
    caption = "busbw as nccl-tests defines it, median over rounds"
    if ceilings:
        ceiling = max(ceilings)
        ax.axhline(ceiling, color="black", linestyle="--", label=f"memory copy {ceiling:.3g} GB/s")
        caption += "; dashed: memory-copy bandwidth measured in the same run, the ceiling on one machine"
    else:
        caption += "; no memcpy_gbps case in this run, so no ceiling is drawn"
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xticks(sorted(ticks), [ticks[k] for k in sorted(ticks)])
    ax.minorticks_off()
    ax.legend(fontsize="small")
    return [save(fig, out / "bandwidth.png", title, caption)]
