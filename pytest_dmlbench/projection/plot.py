"""Projected speedup against rank count, with the measured points (matplotlib, optional, Agg backend)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pytest_dmlbench.errors import ProjectionError
from pytest_dmlbench.projection.analysis import Check, Family
from pytest_dmlbench.projection.model import Network, project

INSTALL_HINT = "the projection plot needs matplotlib: pip install 'pytest-dmlbench[plots]' (or pip install matplotlib)"


def _pyplot() -> Any:
    try:
        import matplotlib
    except ModuleNotFoundError as exc:
        raise ProjectionError(INSTALL_HINT) from exc
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def plot_speedup(path: Path, families: Sequence[Family], checks: Sequence[Check], net: Network,
                 algorithms: Sequence[str], ranks: Sequence[int], backward_share: float) -> Path:
    """One panel per family: projected speedup per algorithm (solid: no overlap, dashed: overlap), the ideal
    line, and the measured speedups of the family's cases. Writes a PNG to ``path``."""
    plt = _pyplot()
    if not path.parent.is_dir():
        raise ProjectionError(f"{path.parent}: no such folder for the plot; create it or pick another --plot path")
    columns = min(2, len(families))
    rows = math.ceil(len(families) / columns)
    fig, axes = plt.subplots(rows, columns, figsize=(6 * columns, 4 * rows), squeeze=False)
    xs = sorted({1, *ranks, *(c.world_size for f in families for c in f.cases)})
    measured = {c.nodeid: c for c in checks}
    for ax, family in zip(axes.flat, families, strict=False):
        for index, algorithm in enumerate(algorithms):
            color = f"C{index}"
            for overlap, style in ((False, "-"), (True, "--")):
                ys = [project(family.workload, net, algorithm, p, overlap=overlap,
                              backward_share=backward_share).speedup for p in xs]
                ax.plot(xs, ys, style, color=color, label=f"{algorithm}{' + overlap' if overlap else ''}")
        ax.plot(xs, xs, ":", color="grey", label="ideal")
        points = [(c.world_size, measured[c.nodeid].measured_speedup) for c in family.cases
                  if measured.get(c.nodeid) is not None and measured[c.nodeid].measured_speedup is not None]
        if points:
            ax.plot([p for p, _ in points], [s for _, s in points], "ko", label="measured")
        ax.set_xscale("log", base=2)
        ax.set_yscale("log", base=2)
        ax.set_xlabel("ranks")
        ax.set_ylabel("speedup")
        ax.set_title(family.name, fontsize=9)
        ax.legend(fontsize=7)
    for ax in list(axes.flat)[len(families):]:
        ax.set_visible(False)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path
