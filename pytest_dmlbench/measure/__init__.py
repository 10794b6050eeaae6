"""Measurement: the clock, rank-agreed timing rounds, collective instrumentation, memory, statistics.

Modules (none imports torch or pytest at import time):

- ``clock``: :func:`now`, the one clock; ``use_clock(fn)`` substitutes it (tests).
- ``rounds``: :class:`RoundPlan` (fixed or adaptive counts) and ``run_rounds``: rounds started at a
  barrier, counts decided by rank 0, per-round values maxed over ranks.
- ``runner``: ``time_callable`` (the ``dmlbench`` fixture's timing) and ``benchmark_training`` (a strategy
  against its no-communication twin: every training metric).
- ``collective_bench``: ``bench_collective`` / ``check_collective`` in the manner of nccl-tests.
- ``collectives``: ``instrument_collectives`` (bytes, calls, time inside collectives) and
  ``counting_comm_hook`` for DDP.
- ``memory``: peak RSS (reset through ``/proc/self/clear_refs``) and CUDA peaks; ``peak_memory_metrics``.
- ``bandwidth``: nccl-tests ``algbw``/``busbw`` and ``memcpy_gbps``.
- ``stats``: ``summarize`` of raw samples.
"""

from __future__ import annotations

from pytest_dmlbench.measure.bandwidth import algbw_gbps, bus_factor, busbw_gbps, memcpy_gbps
from pytest_dmlbench.measure.clock import now, use_clock
from pytest_dmlbench.measure.collective_bench import bench_collective, check_collective
from pytest_dmlbench.measure.collectives import CommCounter, counting_comm_hook, instrument_collectives
from pytest_dmlbench.measure.memory import PeakMemory, PeakMemoryWatch, peak_memory_metrics
from pytest_dmlbench.measure.rounds import RoundPlan, run_rounds
from pytest_dmlbench.measure.runner import benchmark_training, time_callable

__all__ = [
    "CommCounter",
    "PeakMemory",
    "PeakMemoryWatch",
    "RoundPlan",
    "algbw_gbps",
    "bench_collective",
    "benchmark_training",
    "bus_factor",
    "busbw_gbps",
    "check_collective",
    "counting_comm_hook",
    "instrument_collectives",
    "memcpy_gbps",
    "now",
    "peak_memory_metrics",
    "run_rounds",
    "time_callable",
    "use_clock",
]
