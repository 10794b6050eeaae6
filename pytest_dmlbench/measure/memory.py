"""Peak memory of this rank: resident set (Linux ``VmHWM``, reset through ``clear_refs``) and CUDA.

``ru_maxrss`` only grows over a process's life, so in a long-lived rank process it would carry the peak of
an earlier case into the next. Writing ``5`` to ``/proc/self/clear_refs`` resets the high-water mark
``VmHWM`` of ``/proc/self/status`` to the current RSS. Where that file is missing or not writable the peak
cannot be reset: :class:`PeakMemory` then says so (``rss_reset=False``) instead of pretending.

Resetting is not enough in a long-lived rank: the reset peak starts from what the rank holds *now*, and
that depends on every case it ran before (modules they imported, caches they filled). The same case then
reads 100 MB higher after the equivalence suite than alone, and the paired gate's A and B worlds, which
run different cases before a block, read different peaks for the same code. So a case's peak is
*rebased*: what the case added over the rank's resident size at its start, plus the rank's resident size
when it started (:func:`note_rank_start`), the peak a rank that ran only this case would have held.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pytest_dmlbench.results import MetricResult

MB = 1e6
CLEAR_REFS = Path("/proc/self/clear_refs")
STATUS = Path("/proc/self/status")

_UNITS = {"kB": 1024, "mB": 1024**2, "gB": 1024**3, "B": 1}


def parse_status(text: str) -> dict[str, int]:
    """The memory fields (``Vm*``, ``Rss*``...) of a ``/proc/<pid>/status`` text, in bytes."""
    fields: dict[str, int] = {}
    for line in text.splitlines():
        key, sep, rest = line.partition(":")
        parts = rest.split()
        if not sep or len(parts) != 2 or parts[1] not in _UNITS:
            continue
        try:
            fields[key.strip()] = int(parts[0]) * _UNITS[parts[1]]
        except ValueError:
            continue
    return fields


def _status_field(name: str, status: Path = STATUS) -> int | None:
    try:
        text = status.read_text()
    except OSError:
        return None
    return parse_status(text).get(name)


def reset_peak_rss(clear_refs: Path = CLEAR_REFS) -> bool:
    """Reset this process's RSS high-water mark; False when the kernel interface is unavailable."""
    try:
        with open(clear_refs, "w") as handle:
            handle.write("5")
    except OSError:
        return False
    return True


def release_freed_memory() -> bool:
    """Collect recent garbage and hand freed heap pages back to the kernel (glibc ``malloc_trim``), so that
    a rank's resident size before a case does not carry what earlier cases allocated and freed: the reset
    peak starts from there, and two worlds with different histories (the paired gate's A and B) would
    otherwise read different peaks for the same case. Runs at the start and the end of every case, so it
    stays cheap (well under 0.1 ms once the C library is found). False where ``malloc_trim`` is not available.

    The youngest generation only: a full collection of a process that imported torch takes 50-80 ms, and a
    collection of generation 1 moves its survivors into the oldest generation and counts one more collection
    there, so that after a few cases the first automatic collection in a process forked from the rank (a
    ``DataLoader`` worker) was a full one. It wrote to every object the worker inherited: about 11,000
    copy-on-write page faults and 0.11 s a worker, in every round that forks workers (the loader sweep's
    0.09 s rounds read 0.21 s in paired blocks, and 0.33 s on one side of a nightly A/A pair only, since how
    soon it happens depends on the world's history)."""
    import gc

    gc.collect(0)
    trim = _malloc_trim()
    if trim is None:
        return False
    trim(0)
    return True


@functools.cache
def _malloc_trim() -> Any:
    """glibc's ``malloc_trim``, looked up once (``find_library`` alone costs about 0.8 ms); None off glibc."""
    import ctypes
    import ctypes.util

    name = ctypes.util.find_library("c")
    if name is None:
        return None
    try:
        return ctypes.CDLL(name).malloc_trim
    except (OSError, AttributeError):  # not glibc (musl, macOS): nothing to trim with
        return None


_rank_start_rss: int | None = None
_active_watch: PeakMemoryWatch | None = None  # the watch of the case this rank runs now


def note_rank_start() -> int | None:
    """Record this process's resident size as the rank's starting point (once it is ready, before its first
    case; trimmed first, as every case start is). Rebased peaks add what a case raised over its own start
    to this. Returns the size in bytes, None where RSS cannot be read."""
    global _rank_start_rss
    release_freed_memory()
    _rank_start_rss = current_rss_bytes()
    return _rank_start_rss


def rank_start_rss_bytes() -> int | None:
    """The resident size :func:`note_rank_start` recorded, None before it ran."""
    return _rank_start_rss


def peak_rss_bytes(status: Path = STATUS) -> int | None:
    """``VmHWM`` (peak resident set since start or the last reset) in bytes; None where not available.

    Falls back to ``resource.getrusage`` (peak since process start, never reset) off Linux.
    """
    value = _status_field("VmHWM", status)
    if value is not None:
        return value
    try:
        import resource
    except ImportError:
        return None
    return int(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss) * 1024


def current_rss_bytes(status: Path = STATUS) -> int | None:
    """``VmRSS`` in bytes, None where not available."""
    return _status_field("VmRSS", status)


def _cuda_device(device: Any) -> Any:
    import torch

    if device is None or not torch.cuda.is_available():
        return None
    device = torch.device(device)
    return device if device.type == "cuda" else None


def case_peak_rss_bytes() -> int | None:
    """The rebased peak of the case being measured on this rank (the raw ``VmHWM`` when no watch started),
    for code inside a case that reads its peak part-way (experiments, per phase)."""
    return _active_watch.peak_rss_bytes() if _active_watch is not None else peak_rss_bytes()


@dataclass(frozen=True)
class PeakMemory:
    """Peak memory of one rank over a measured span. ``rss_reset`` False: the peak may predate the span."""

    peak_rss_mb: float | None
    rss_reset: bool
    peak_cuda_mb: float | None


class PeakMemoryWatch:
    """Reset peaks with :meth:`start`, read them with :meth:`stop`. ``device`` selects the CUDA device."""

    def __init__(self, device: Any = None) -> None:
        self.device = device
        self._rss_reset = False
        self._started = False
        self._start_rss: int | None = None

    def start(self) -> PeakMemoryWatch:
        release_freed_memory()  # the peak restarts from what the rank holds, not what earlier cases freed
        self._rss_reset = reset_peak_rss()
        self._start_rss = current_rss_bytes()
        if _rank_start_rss is None:  # a rank started by a launcher: its first measured case is its start
            note_rank_start()
        global _active_watch
        _active_watch = self
        cuda = _cuda_device(self.device)
        if cuda is not None:
            import torch

            torch.cuda.synchronize(cuda)
            torch.cuda.reset_peak_memory_stats(cuda)
        self._started = True
        return self

    def stop(self) -> PeakMemory:
        if not self._started:
            raise RuntimeError("PeakMemoryWatch.stop() called before start(); call start() before the case")
        rss = self.peak_rss_bytes()
        cuda_mb: float | None = None
        cuda = _cuda_device(self.device)
        if cuda is not None:
            import torch

            torch.cuda.synchronize(cuda)
            cuda_mb = torch.cuda.max_memory_allocated(cuda) / MB
        return PeakMemory(
            peak_rss_mb=None if rss is None else rss / MB,
            rss_reset=self._rss_reset,
            peak_cuda_mb=cuda_mb,
        )

    def peak_rss_bytes(self) -> int | None:
        """The rebased peak since :meth:`start` (the raw ``VmHWM`` where the peak could not be reset or the
        start sizes cannot be read)."""
        peak = peak_rss_bytes()
        if peak is None or not self._rss_reset or self._start_rss is None or _rank_start_rss is None:
            return peak
        return _rank_start_rss + max(0, peak - self._start_rss)


def peak_memory_metrics(per_rank: Sequence[PeakMemory]) -> dict[str, MetricResult]:
    """``peak_rss_mb`` and ``peak_cuda_mb`` of a case from every rank's :class:`PeakMemory`: the max over
    ranks, one sample each. Needs no collective, so the parent can compute it from the ranks' reports
    even when the case failed on some rank. A figure no rank could read is left out."""
    metrics: dict[str, MetricResult] = {}
    rss = [p.peak_rss_mb for p in per_rank if p.peak_rss_mb is not None]
    cuda = [p.peak_cuda_mb for p in per_rank if p.peak_cuda_mb is not None]
    if rss:
        metrics["peak_rss_mb"] = MetricResult.of("peak_rss_mb", [max(rss)])
    if cuda:
        metrics["peak_cuda_mb"] = MetricResult.of("peak_cuda_mb", [max(cuda)])
    return metrics
