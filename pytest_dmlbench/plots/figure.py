"""Shared figure plumbing: matplotlib on the Agg backend, one fixed size, PNG output.

matplotlib is an optional dependency (extra ``plots``); :func:`pyplot` says how to install it.
"""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pytest_dmlbench.errors import PlotsUnavailable

WIDTH_IN, HEIGHT_IN, DPI = 8.0, 4.5, 100
PIXELS = (int(WIDTH_IN * DPI), int(HEIGHT_IN * DPI))
"""Every PNG is this many pixels (width, height)."""
MAX_SERIES = 8
"""At most this many lines in one figure; more go into further figures."""
MAX_BARS = 14
"""At most this many bars in one figure; more cases are spread evenly over further figures."""
INSTALL_HINT = "pip install matplotlib (in the environment that runs pytest-dmlbench)"
"""How to get matplotlib, whatever way pytest-dmlbench itself was installed (the ``plots`` extra needs the
package's name on an index; a checkout installed from its path has none)."""


@dataclass(frozen=True)
class Figure:
    """One written PNG and what it shows; ``drawing`` is the closed matplotlib figure it was saved from
    (its axes, lines and ticks can still be read)."""

    path: Path
    title: str
    caption: str
    drawing: Any = field(default=None, compare=False, repr=False)


@dataclass(frozen=True)
class Skipped:
    """A figure family that had nothing to draw, and why."""

    family: str
    reason: str


def matplotlib_installed() -> bool:
    """Whether matplotlib can be found, without importing it (a check before a run that will draw)."""
    try:
        return importlib.util.find_spec("matplotlib") is not None
    except (ImportError, ValueError):  # a finder that refuses it, or a module object without a spec
        return False


def pyplot() -> Any:
    """``matplotlib.pyplot`` on the non-interactive Agg backend."""
    try:
        import matplotlib
    except ImportError:
        raise PlotsUnavailable(f"plots need matplotlib, which is not installed: {INSTALL_HINT}") from None
    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    return plt


def new_figure(columns: int = 1) -> tuple[Any, list[Any]]:
    """A figure of :data:`PIXELS` with ``columns`` axes side by side."""
    plt = pyplot()
    fig, axes = plt.subplots(1, columns, figsize=(WIDTH_IN, HEIGHT_IN), dpi=DPI, layout="constrained",
                             squeeze=False)
    return fig, list(axes[0])


def style(ax: Any, title: str, xlabel: str, ylabel: str) -> Any:
    ax.set_title(title, fontsize="medium")
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.grid(True, alpha=0.3)
    return ax


def new_axes(title: str, xlabel: str, ylabel: str) -> tuple[Any, Any]:
    """A figure with one styled axes."""
    fig, (ax,) = new_figure()
    return fig, style(ax, title, xlabel, ylabel)


def save(fig: Any, path: Path, title: str, caption: str) -> Figure:
    """Write ``fig`` as a PNG of exactly :data:`PIXELS` and close it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=DPI, format="png")
    pyplot().close(fig)
    return Figure(path, title, caption, fig)


def chunks(items: list[Any], size: int = MAX_SERIES) -> list[list[Any]]:
    """``items`` in as few groups of at most ``size`` as possible, of nearly equal length."""
    if not items:
        return [[]]
    groups = -(-len(items) // size)
    per_group = -(-len(items) // groups)
    return [items[i : i + per_group] for i in range(0, len(items), per_group)]


def numbered(stem: str, index: int, total: int) -> str:
    return f"{stem}.png" if total == 1 else f"{stem}-{index + 1}.png"
