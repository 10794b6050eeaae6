"""What each figure is: the kind of reading a metric is, what that kind cannot see, and the names of the
collective calls counted by kind.

A verdict is decided by one figure, and each kind of figure is blind to something: wall time sees everything
(the neighbours on a shared machine too), CPU time misses waiting, the exact work counters miss speed. The
verdict message, the table and the report name the kind (:func:`seen_by`) so a reader knows what kind of
change a verdict can and cannot stand for. Calls counted by kind are figures of their own, one per kind a
step calls (``collective_calls_per_step.all_reduce``: :func:`pytest_dmlbench.results.calls_metric`).
"""

from __future__ import annotations

from typing import Literal

from pytest_dmlbench.results import CALLS_TOTAL, call_kind

FigureKind = Literal["wall time", "CPU time", "work counter", "memory peak", "other"]

_WALL_TIME = frozenset({"step_time_s", "throughput_samples_per_s", "exposed_comm_fraction", "comm_busy_fraction",
                        "algbw_gbps", "busbw_gbps", "epoch_time_s", "total_time_s", "time_to_accuracy_s",
                        "world_start_s", "dispatch_overhead_s", "speedup", "scaling_efficiency"})
_WORK_COUNTERS = frozenset({CALLS_TOTAL, "comm_bytes_per_step", "flops_per_step"})
_MEMORY = frozenset({"peak_rss_mb", "peak_cuda_mb"})

BLIND_SPOTS: dict[FigureKind, str] = {
    "wall time": "sees everything, the neighbours on a shared machine too",
    "CPU time": ("misses waiting: a slower peer, lost overlap, an added barrier or sleep, I/O (and on CUDA ranks it "
                 "is the host's launch and synchronisation work, not the device's)"),
    "work counter": "counts exactly and misses speed: equal counted work done slower reads equal",
    "memory peak": "sees memory, not time",
    "other": "",
}
_NAMED: dict[FigureKind, str] = {"wall time": "wall time", "CPU time": "CPU time", "work counter": "a work counter",
                                 "memory peak": "a memory peak", "other": ""}


def calls_named(name: str) -> str:
    """What a call count counts, in words: ``all_reduce calls`` for a kind, ``collective calls`` for the total."""
    kind = call_kind(name)
    return f"{kind} calls" if kind is not None else "collective calls"


def figure_kind(name: str) -> FigureKind:
    """What kind of reading the figure ``name`` is."""
    if name == "cpu_time_s":
        return "CPU time"
    if name in _WORK_COUNTERS or call_kind(name) is not None:
        return "work counter"
    if name in _MEMORY:
        return "memory peak"
    if name in _WALL_TIME:
        return "wall time"
    return "other"


def labelled(name: str) -> str:
    """``cpu_time_s (CPU time)``: a figure's name with the kind of reading it is, as the table and the reports list
    a verdict (the name alone for a figure of no known kind, a user's own)."""
    kind = figure_kind(name)
    return name if kind == "other" else f"{name} ({kind})"


def seen_by(name: str) -> str:
    """``CPU time, which misses waiting: ...``, ``a work counter, which ...``: the kind of figure that decided a
    verdict and what it cannot see (empty for a figure of no known kind, a user's own)."""
    kind = figure_kind(name)
    return f"{_NAMED[kind]}, which {BLIND_SPOTS[kind]}" if kind != "other" else ""
