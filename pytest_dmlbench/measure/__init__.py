"""Measurement: the clock, rank-agreed timing rounds, collective instrumentation, memory, statistics.

Modules (none imports torch or pytest at import time; import them directly, this package imports
nothing so that ``results`` can use ``stats`` without a cycle):

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
