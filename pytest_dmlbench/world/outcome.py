"""The parent's view of one case on a world: each rank's report, and whether the world survived it."""

from __future__ import annotations

from dataclasses import dataclass

from pytest_dmlbench.world.agreement import rebuild_reasons, unmatched_collectives
from pytest_dmlbench.world.messages import RankOutcome


@dataclass
class RankReport:
    """What one rank did during a case."""

    rank: int
    outcome: RankOutcome | None = None
    died: str | None = None
    stuck: bool = False
    stack: str = ""
    output: str = ""


@dataclass
class CaseOutcome:
    """Every rank's report for one case (the parent's view), and whether the world survived it."""

    ranks: list[RankReport]
    elapsed_s: float
    timed_out: bool = False
    world_broken: bool = False
    timeout_s: float = 0.0
    grace_s: float = 0.0  # how long the others had to report once a rank failed, died or skipped
    unmatched: str = ""  # the ranks issued different numbers of collectives (see world.agreement)
    rebuilt_because: str = ""  # the case destroyed/replaced the default group or left unrestorable state

    @property
    def passed(self) -> bool:
        return not self.unmatched and all(r.outcome is not None and r.outcome.status == "passed"
                                          for r in self.ranks)

    def check_agreement(self) -> None:
        """Fill ``unmatched`` and ``rebuilt_because`` from the outcomes; either one breaks the world."""
        outcomes = [r.outcome for r in self.ranks if r.outcome is not None]
        if len(outcomes) == len(self.ranks):
            self.unmatched = unmatched_collectives(outcomes)
        self.rebuilt_because = rebuild_reasons(outcomes)
        if self.unmatched or self.rebuilt_because:
            self.world_broken = True
