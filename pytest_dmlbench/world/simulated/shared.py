"""What the ranks of one simulated world share: the turns, the groups, and each rank's last collective."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from pytest_dmlbench.world.rank_names import rank_spans
from pytest_dmlbench.world.simulated.p2p_strict import Blocked
from pytest_dmlbench.world.simulated.pending import RankPending
from pytest_dmlbench.world.simulated.rendezvous import GroupState
from pytest_dmlbench.world.simulated.turns import TurnTaking


def rank_ranges(ranks: Sequence[int]) -> str:
    """``rank 3`` or ``ranks 0-4, 6, 8-1023``."""
    return ("rank " if len(ranks) == 1 else "ranks ") + rank_spans(list(ranks))


@dataclass
class RankState:
    """A rank as the stall report tells it."""

    state: str = "not started"  # running, waiting in, ended, failed
    last: str = ""  # its last collective or point-to-point call

    def __str__(self) -> str:
        if self.state == "waiting":
            return f"wait in {self.last}"
        last = f" (last collective: {self.last})" if self.last else " (no collective issued)"
        return f"{self.state}{last}"


class SharedWorld:
    """One simulated world of ``world_size`` ranks for one case."""

    def __init__(self, world_size: int, on_switch: Callable[[int, int], None], *, strict: bool = False) -> None:
        self.world_size = world_size
        self.strict = strict  # strict mode: async work pending until wait(), sends complete when matched
        self.pending = [RankPending(rank) for rank in range(world_size)] if strict else []
        self.blocked: dict[int, Blocked] = {}  # strict mode: ranks waiting for an unmatched point-to-point call
        self.groups: dict[str, GroupState] = {}
        self.ranks = [RankState() for _ in range(world_size)]
        self.turns = TurnTaking(world_size, on_switch, self.stall_report)

    def group(self, name: str, members: Sequence[int]) -> GroupState:
        """The state every member's process group of ``name`` shares (made by the first)."""
        state = self.groups.get(name)
        if state is None:
            state = self.groups[name] = GroupState(name, tuple(members))
        return state

    def every_rank(self) -> str:
        """Each rank's state and last collective, ranks that say the same grouped."""
        by_text: dict[str, list[int]] = {}
        for rank, state in enumerate(self.ranks):
            by_text.setdefault(str(state), []).append(rank)
        ordered = sorted(by_text.items(), key=lambda item: item[1][0])
        return "; ".join(f"{rank_ranges(ranks)}: {text}" for text, ranks in ordered)

    def stall_report(self) -> str:
        """Why no rank can go on (called when the last runnable rank waits or ends)."""
        return (f"no simulated rank can go on, a collective or receive cannot be matched: {self.every_rank()}. "
                "Every rank must issue the same collectives on each group in the same order, and every "
                "receive needs a send")
