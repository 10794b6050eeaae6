"""Matching the members of a group at each collective, and the messages of point-to-point calls.

Every member's process group numbers its collectives; the first member to arrive at collective ``k``
states what it is (kind, reduction, dtypes, shapes, root), later members must state the same, and the last
one to arrive completes it for everyone. Sends are buffered (they never wait); a receive waits until a
matching message is there. In strict mode sends and receives match as ``p2p_strict`` says.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch

from pytest_dmlbench.world.simulated.p2p_strict import Matcher


@dataclass(frozen=True)
class Call:
    """What a member asks of collective number ``seq``: compared across the group."""

    kind: str
    detail: str
    shapes: tuple[str, ...] = ()  # strict mode: every tensor's dtype and shape, where ``detail`` summarises many

    def __str__(self) -> str:
        return f"{self.kind}({self.detail})" if self.detail else self.kind


@dataclass
class Gathering:
    """One collective of one group while its members arrive."""

    call: Call
    first: int  # the group rank that stated the call
    payloads: dict[int, Any] = field(default_factory=dict)
    result: Any = None
    done: bool = False


def _first_difference(first: Call, other: Call) -> str:
    """Where two calls alike in their summary differ (strict mode's full shape check)."""
    if (first.kind, first.detail) != (other.kind, other.detail) or first.shapes == other.shapes:
        return ""
    if len(first.shapes) != len(other.shapes):
        return f" (strict mode: {len(other.shapes)} tensors where it gave {len(first.shapes)})"
    index = next(i for i, (a, b) in enumerate(zip(first.shapes, other.shapes, strict=True)) if a != b)
    return f" (strict mode: tensor {index} is {other.shapes[index]} where it gave {first.shapes[index]})"


class CollectiveMismatch(Exception):
    """A member asked for another collective than the one its group is in; the message says both."""


@dataclass
class GroupState:
    """What the members of one group share: pending collectives and undelivered messages."""

    name: str
    members: tuple[int, ...]  # global ranks, in group-rank order
    pending: dict[int, Gathering] = field(default_factory=dict)
    mailbox: dict[tuple[int, int, int], deque[torch.Tensor]] = field(default_factory=dict)
    matcher: Matcher = field(default_factory=Matcher)  # strict mode's unmatched sends and receives

    @property
    def label(self) -> str:
        return "the default group" if self.name == "0" else f"group {self.name}"

    def arrive(self, seq: int, group_rank: int, call: Call, payload: Any,
               complete: Callable[[list[Any]], Any]) -> Gathering:
        """Add ``group_rank``'s part to collective ``seq``; the last part completes it (``complete`` gets the
        payloads in group-rank order). Raises CollectiveMismatch when the calls differ."""
        gathering = self.pending.get(seq)
        if gathering is None:
            gathering = self.pending[seq] = Gathering(call, group_rank)
        elif gathering.call != call:
            raise CollectiveMismatch(
                f"rank {self.members[group_rank]} called {call} as collective #{seq} of {self.label}, where rank "
                f"{self.members[gathering.first]} called {gathering.call}{_first_difference(gathering.call, call)}"
            )
        gathering.payloads[group_rank] = payload
        if len(gathering.payloads) == len(self.members):
            gathering.result = complete([gathering.payloads[r] for r in range(len(self.members))])
            gathering.done = True
            del self.pending[seq]
        return gathering

    def post(self, src: int, dst: int, tag: int, tensor: torch.Tensor) -> None:
        """Buffer a copy of ``tensor`` from group rank ``src`` to ``dst``."""
        self.mailbox.setdefault((src, dst, tag), deque()).append(tensor.detach().clone())

    def take(self, srcs: range | tuple[int, ...], dst: int, tag: int) -> tuple[int, torch.Tensor] | None:
        """The oldest message to ``dst`` from the lowest ``src`` that has one, or None."""
        for src in srcs:
            queue = self.mailbox.get((src, dst, tag))
            if queue:
                return src, queue.popleft()
        return None
