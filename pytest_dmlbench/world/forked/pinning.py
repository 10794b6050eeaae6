"""Pinning forked ranks to cores: rank ``r`` of every world on the same core.

Unpinned, the kernel moves rank processes between cores as it likes, so two blocks of the same case can run
with their ranks placed differently (one sharing a core with the other side's idle server, a rank migrating
mid-block). Pinned, rank ``r`` of A's worlds and of REF's worlds runs on the same core, the ``r % n``-th of
the ``n`` cores the process may use, so a block pair compares like with like. Linux only
(``os.sched_setaffinity``); elsewhere the option is refused before any rank starts (``config.py``).
"""

from __future__ import annotations

import os
from collections.abc import Sequence


def usable_cores() -> list[int]:
    """The cores this process may run on, in order."""
    return sorted(os.sched_getaffinity(0))


def core_for_rank(rank: int, cores: Sequence[int]) -> int:
    """The core rank ``rank`` is pinned to: the ``rank % len(cores)``-th of ``cores``."""
    if rank < 0:
        raise ValueError(f"rank must be >= 0, got {rank}")
    if not cores:
        raise ValueError("no cores to pin to")
    return cores[rank % len(cores)]


def pin_this_rank(rank: int, cores: Sequence[int]) -> int:
    """Pin the calling process to its rank's core; the core."""
    core = core_for_rank(rank, cores)
    os.sched_setaffinity(0, {core})
    return core
