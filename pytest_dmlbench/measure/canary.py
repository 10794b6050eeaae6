"""A canary: a fixed piece of work timed beside every block, to read how fast the machine is right now.

The paired gate times the same fixed workload in A's pytest process just before and just after each block
of either side. The workload never changes between A and B (it is this process's code, whatever REF is),
so any difference between the canary readings of A's block and B's block of one pair is the machine's
phase at that moment (other jobs, CPU frequency, a noisy neighbour), not the code under test. The gate
can then adjust each pair for it (``gates/paired/canary_adjustment.py``).

The workload is pure Python integer arithmetic on one core: no torch, no threads, no memory traffic to
speak of, so it reads the CPU time the machine gives this process and nothing of the code it guards.
"""

from __future__ import annotations

import math

from pytest_dmlbench.measure.clock import now

CANARY_ITERATIONS = 60_000
"""Loop steps of one reading: about 3 ms on this 2-core machine (two readings per block)."""


def _workload(iterations: int) -> int:
    total = 0
    for i in range(iterations):
        total = (total + i * i) % 1_000_003
    return total


def read_canary(iterations: int = CANARY_ITERATIONS) -> float:
    """Seconds the fixed workload took now, on the measurement clock (a substituted clock that does not
    move reads 0, which the adjustment treats as no reading)."""
    if iterations < 1:
        raise ValueError(f"a canary needs at least one iteration, got {iterations}")
    start = now()
    _workload(iterations)
    return now() - start


def bracket(before: float, after: float) -> float:
    """One block's canary: the geometric mean of the readings just before and just after it (NaN when
    either is not a positive, finite reading)."""
    if not all(math.isfinite(x) and x > 0.0 for x in (before, after)):
        return math.nan
    return math.sqrt(before * after)
