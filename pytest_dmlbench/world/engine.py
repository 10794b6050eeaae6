"""The one small interface every execution mode implements, and the records that cross it.

The plugin registers exactly one engine per pytest process (forked worlds, or this process's rank in a
world an external launcher started) and calls it without knowing which: prepare the collected cases,
choose a backend (or a reason to skip), run a case and return every rank's outcome, say whether this
process reports, close. Nothing here imports pytest.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from pytest_dmlbench.measure.rounds import BlockBudget
from pytest_dmlbench.world.backend import BackendChoice
from pytest_dmlbench.world.outcome import CaseOutcome


@dataclass(frozen=True)
class CollectedCase:
    """A distributed case as collected: its body, the argument names and direct parametrize values."""

    nodeid: str
    func: Callable[..., Any]
    argnames: tuple[str, ...]
    params: Mapping[str, Any]


@dataclass(frozen=True)
class PreparedCase:
    """One item ready to run: the collected case, its fixture values and where and how long to run it."""

    case: CollectedCase
    funcargs: Mapping[str, Any]
    world_size: int
    backend: str
    timeout_s: float
    uses_bench: bool
    isolation: str = "persistent"  # or "fresh": a world of its own (forked engine only)
    block: BlockBudget | None = None  # one block of the paired gate (forked and Ray engines)
    communicates: bool = True  # False: the case means its ranks never to use the group (simulated engine)
    strict: bool = False  # simulated engine: strict mode (async work completes at wait(), sends when matched)


class Engine(Protocol):
    """How this pytest process runs distributed cases."""

    @property
    def reports(self) -> bool:
        """Whether this process prints and writes the run's reports (one process per world does)."""

    def prepare(self, cases: Sequence[CollectedCase]) -> None:
        """Called once after collection; raises CaseNotRunnable when the cases cannot be run here."""

    def choose_backend(self, requested: str, world_size: int) -> BackendChoice:
        """The backend a case asking for ``requested`` on ``world_size`` ranks runs on, or a skip reason."""

    def run(self, case: PreparedCase) -> CaseOutcome:
        """Run the case on every rank; raises CaseNotRunnable when it cannot be sent."""

    def close(self) -> None:
        """Release every process and resource; no rank outlives this."""
