"""Measurement on the ranks: the clock, rank-agreed timing rounds, the benchmark runner, memory, bandwidth.

Modules (none imports torch or pytest at import time; import them directly):

- ``clock``: :func:`now`, the one clock; ``use_clock(fn)`` substitutes it (tests).
- ``rounds``: :class:`RoundPlan` (fixed or adaptive counts) and ``run_rounds``: rounds started at a
  barrier, counts decided by rank 0, per-round values maxed over ranks.
- ``runner``: ``time_callable`` (the ``dmlbench`` fixture's timing) and ``benchmark_training`` (a strategy
  against its no-communication twin: every training metric).
- ``collective_bench``: ``bench_collective`` / ``check_collective`` in the manner of nccl-tests.
- ``memory``: peak RSS (reset through ``/proc/self/clear_refs``) and CUDA peaks; ``peak_memory_metrics``.
- ``bandwidth``: nccl-tests ``algbw``/``busbw`` and ``memcpy_gbps``.
- ``comm``: the one communication-accounting layer: bytes, calls and time inside collectives
  (``pytest_dmlbench.comm``, a deprecated import path, is the same module until 1.0).
- ``bench`` and ``dist_info``: the rank-side API, the ``dmlbench`` and ``dist`` fixtures on a rank.
- ``op_profile``: per-operator profiles of a block; ``contention``: what else used the cores.

The statistics of samples live in :mod:`pytest_dmlbench.results.stats`.
"""

from __future__ import annotations
