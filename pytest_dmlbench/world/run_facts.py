"""What a run's figures depend on beyond the machine: cores, xdist workers, world size, oversubscription.

The one place these facts are worked out; the report header, the rank thread counts and the results
JSON all read them from here.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from pytest_dmlbench.results import oversubscribed_world


def xdist_worker_count(numprocesses: object, environ: Mapping[str, str], cores: int) -> int:
    """How many pytest-xdist workers share the machine: an xdist worker reads its environment, the
    controller its ``-n`` value (``auto``/``logical`` meaning one per core); 1 without xdist."""
    count = environ.get("PYTEST_XDIST_WORKER_COUNT", "")
    if count.isdigit():
        return max(1, int(count))
    if isinstance(numprocesses, int) and numprocesses > 0:
        return numprocesses
    if numprocesses in ("auto", "logical"):
        return cores
    return 1


@dataclass(frozen=True)
class RunFacts:
    """Cores of this machine and the pytest-xdist workers sharing them in this run."""

    cores: int
    workers: int

    @classmethod
    def here(cls, numprocesses: object) -> RunFacts:
        """The facts of this process, given pytest-xdist's ``-n`` value (None without xdist)."""
        cores = os.cpu_count() or 1
        return cls(cores=cores, workers=xdist_worker_count(numprocesses, os.environ, cores))

    @classmethod
    def recorded(cls, run: Mapping[str, object]) -> RunFacts | None:
        """The facts a results file's ``run`` section recorded (cores and xdist workers); None where it does not
        say."""
        cores, workers = run.get("cores"), run.get("xdist_workers") or 1
        if not isinstance(cores, int) or not isinstance(workers, int) or cores < 1:
            return None
        return cls(cores=cores, workers=max(1, workers))

    def cores_per_world(self) -> int:
        """The cores one world's ranks can use: the machine's, shared among the xdist workers."""
        return max(1, self.cores // max(1, self.workers))

    def oversubscribed(self, world_size: int) -> bool:
        """Whether ranks of all workers together exceed the cores (timings are then pessimistic)."""
        return oversubscribed_world(world_size, self.workers, self.cores)

    def threads_per_rank(self, world_size: int) -> int:
        """Intra-op threads for each rank so that all ranks of all workers share the cores."""
        return max(1, self.cores // max(1, world_size * self.workers))

    def to_dict(self, world_size: int, threshold_pct: float) -> dict[str, Any]:
        """The ``run`` section of the results JSON."""
        return {
            "world_size": world_size,
            "xdist_workers": self.workers,
            "cores": self.cores,
            "oversubscribed": self.oversubscribed(world_size),
            "threshold_pct": threshold_pct,
        }
