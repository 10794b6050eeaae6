"""Sending one case to every rank of a world and gathering what comes back, written once for every kind of
world that keeps its ranks (forked processes, Ray actors).

A kind of world says how to send the case (:meth:`CaseDispatch._send`), wait for answers, receive one and
read a stuck rank's stack; the loop here gives every kind the same contract: every wait has the case's
timeout, a failed or dead rank gives the others :data:`FAILURE_GRACE_S` to report before they count as
stuck, a world whose ranks died, hung, disagree on their collectives or failed after using their group is
never reused (ranks that all failed before touching it, a ``GroupMismatch`` say, leave it as it was).
"""

from __future__ import annotations

import time
from abc import ABC, abstractmethod
from typing import Any

from pytest_dmlbench.measure.rounds import BlockBudget
from pytest_dmlbench.world.messages import CaseRequest, RankOutcome, WorldSpec
from pytest_dmlbench.world.outcome import CaseOutcome, RankReport
from pytest_dmlbench.world.rank_warnings import filters_in_force, raise_in_parent

# After one rank has failed or died, how long the others get to report before they count as stuck.
FAILURE_GRACE_S = 1.0


def group_unharmed(reports: list[RankReport]) -> bool:
    """Every rank answered, and where one failed none touched the default group (no collective or
    point-to-point operation, no sub-group): the group is as the case found it and the world can go on."""
    outcomes = [r.outcome for r in reports]
    if any(o is None for o in outcomes):
        return False
    return not any(o.status == "failed" for o in outcomes if o) or not any(o.group_touched for o in outcomes if o)


class RankLost(Exception):
    """A rank's channel closed before it answered: the rank died; the message says how."""


class CaseDispatch(ABC):
    """The ``run`` of a world whose ranks stay up between cases."""

    spec: WorldSpec
    broken: bool
    _case_counter: int
    # whether the ranks run the body under the item's warning filters and send their warnings back
    # (rank_warnings); off where a filter's warning class might not unpickle (Ray actors)
    forwards_warnings = False

    def run(self, nodeid: str, *, seed: int, registry_args: tuple[str, ...], pickled_args: bytes,
            measure_memory: bool, timeout_s: float, block: BlockBudget | None = None) -> CaseOutcome:
        """Send the case to every rank and collect each rank's outcome (or death, or stack when stuck)."""
        self._case_counter += 1
        message = CaseRequest(self._case_counter, nodeid, seed, registry_args, pickled_args, measure_memory, block,
                              filters_in_force() if self.forwards_warnings else None)
        reports = [RankReport(rank) for rank in range(self.spec.world_size)]
        begin = time.monotonic()
        pending = self._send(message)
        deadline = begin + timeout_s
        timed_out = False
        while pending:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                timed_out = deadline == begin + timeout_s
                break
            for handle in self._ready(list(pending), remaining):
                rank = pending.pop(handle)
                try:
                    outcome, output = self._receive(handle, rank)
                except RankLost as lost:
                    reports[rank].died = str(lost)
                    self.broken = True
                    deadline = min(deadline, time.monotonic() + FAILURE_GRACE_S)
                    continue
                assert outcome.case_id == message.case_id, outcome
                reports[rank].outcome = outcome
                if output is not None:
                    reports[rank].output = output
                if outcome.status != "passed":
                    deadline = min(deadline, time.monotonic() + FAILURE_GRACE_S)
        if pending:
            self.broken = True
            stuck = sorted(pending.values())
            for rank in stuck:
                reports[rank].stuck = True
            self._collect_stacks(reports, stuck)
        elif not group_unharmed(reports):
            self.broken = True  # ranks that failed may have left collectives unmatched: never reuse the world
        self._collect_output(reports)
        run = CaseOutcome(reports, time.monotonic() - begin, timed_out=timed_out, world_broken=self.broken,
                          timeout_s=timeout_s, grace_s=FAILURE_GRACE_S)
        run.check_agreement()
        if run.world_broken:
            self.kill()
        raise_in_parent((r.rank, r.outcome.warnings) for r in reports if r.outcome is not None)
        return run

    @abstractmethod
    def _send(self, message: CaseRequest) -> dict[Any, int]:
        """Start the case on every rank; a handle to wait on per rank, mapped to its rank."""

    @abstractmethod
    def _ready(self, handles: list[Any], timeout_s: float) -> list[Any]:
        """The handles with an answer, waiting at most ``timeout_s``."""

    @abstractmethod
    def _receive(self, handle: Any, rank: int) -> tuple[RankOutcome, str | None]:
        """The rank's outcome and its output when the answer carries it; :class:`RankLost` if it died."""

    @abstractmethod
    def _collect_stacks(self, reports: list[RankReport], ranks: list[int]) -> None:
        """Fill the stacks of the ranks that did not answer in time."""

    @abstractmethod
    def _collect_output(self, reports: list[RankReport]) -> None:
        """Fill each rank's output when it is not part of the answer (a log file, say)."""

    @abstractmethod
    def kill(self) -> None:
        """End every rank; the world is not used again."""
