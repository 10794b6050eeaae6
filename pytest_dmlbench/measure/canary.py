"""A canary: a fixed piece of work timed beside (or during) every block, to read how fast the machine is now.

The paired gate times the same fixed workload in A's pytest process just before and just after each block
of either side. The workload never changes between A and B (it is this process's code, whatever REF is),
so any difference between the canary readings of A's block and B's block of one pair is the machine's
phase at that moment (other jobs, CPU frequency, a noisy neighbour), not the code under test. The gate
can then adjust each pair for it (``gates/paired/canary_adjustment.py``).

The workload is pure Python integer arithmetic on one core: no torch, no threads, no memory traffic to
speak of, so it reads the CPU time the machine gives this process and nothing of the code it guards.

Read beside a block, the canary sees the machine between blocks, not the contention the ranks meet during
one. :class:`CanaryDuring` reads it during the block instead: a thread of A's pytest process (idle while a
block server runs the block) times a small slice of the workload over and over, resting between slices so
that it takes about :data:`DURING_DUTY` of one core, and reports the median slice scaled to a whole reading.
"""

from __future__ import annotations

import math
import statistics
import threading
from types import TracebackType

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


DURING_ITERATIONS = 6_000
"""Loop steps of one slice read during a block: about 0.3 ms on this 2-core machine."""
DURING_DUTY = 0.1
"""Share of one core the canary takes during a block: each slice is followed by nine times its length at rest."""


class CanaryDuring:
    """The canary read over and over while a block runs (``with CanaryDuring() as canary: run the block``);
    :meth:`reading` is the median slice, in seconds of a whole reading (:data:`CANARY_ITERATIONS`), NaN when
    the block ended before a slice did."""

    def __init__(self, iterations: int = DURING_ITERATIONS, duty: float = DURING_DUTY) -> None:
        if iterations < 1 or not 0.0 < duty <= 1.0:
            raise ValueError(f"a canary during a block needs iterations >= 1 and a duty in (0, 1], "
                             f"got {iterations} and {duty}")
        self.iterations, self.duty = iterations, duty
        self.slices: list[float] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._read, name="dmlbench-canary", daemon=True)

    def _read(self) -> None:
        while not self._stop.is_set():
            took = read_canary(self.iterations)
            self.slices.append(took)
            # rest in proportion; a substituted clock that does not move (took 0) rests a fixed millisecond
            self._stop.wait(took * (1.0 - self.duty) / self.duty if took > 0.0 else 0.001)

    def __enter__(self) -> CanaryDuring:
        self._thread.start()
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 trace: TracebackType | None) -> None:
        self._stop.set()
        self._thread.join()

    def reading(self) -> float:
        """The median slice scaled to :data:`CANARY_ITERATIONS` (NaN without a positive slice)."""
        positive = [took for took in self.slices if math.isfinite(took) and took > 0.0]
        if not positive:
            return math.nan
        return statistics.median(positive) * CANARY_ITERATIONS / self.iterations
