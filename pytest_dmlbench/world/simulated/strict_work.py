"""Strict mode's work objects: a collective or point-to-point call that completes at ``wait()``.

A collective's members arrive without waiting; its result is computed (once, by the last to arrive) into
copies of the members' tensors staged at their calls, and reaches a member's own tensors only when that member
waits for the work, or for a later collective of the same group (which, as on one NCCL stream, implies the
earlier ones). Until then the outputs hold poison and the watch of ``pending`` guards them. A blocking call
(``async_op=False``) has no such work: it is waited for at once, so nothing is staged or watched for it, and
it delivers the rank's earlier work on its group.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from datetime import timedelta
from typing import Any

import torch
import torch.distributed as dist

from pytest_dmlbench.world.simulated.p2p_strict import Blocked, Request, deadlock_report, find_cycle
from pytest_dmlbench.world.simulated.pending import PendingWork, internal
from pytest_dmlbench.world.simulated.rendezvous import Gathering
from pytest_dmlbench.world.simulated.shared import SharedWorld
from pytest_dmlbench.world.simulated.turns import WorldAborted


def flat_tensors(value: Any) -> Iterator[torch.Tensor]:
    """Every tensor in nested lists and tuples."""
    if isinstance(value, torch.Tensor):
        yield value
    elif isinstance(value, (list, tuple)):
        for item in value:
            yield from flat_tensors(item)


def staged(value: Any, clones: dict[int, torch.Tensor]) -> Any:
    """``value`` with every tensor replaced by a copy (one copy per tensor object, kept in ``clones``)."""
    if isinstance(value, torch.Tensor):
        if id(value) not in clones:
            clones[id(value)] = value.detach().clone()
        return clones[id(value)]
    if isinstance(value, list):
        return [staged(item, clones) for item in value]
    if isinstance(value, tuple):
        return tuple(staged(item, clones) for item in value)
    return value


class _StrictWork(dist.Work):
    """Common to strict mode's work: the result, and a future complete once waited for."""

    def __init__(self, result: list[torch.Tensor]) -> None:
        super().__init__()
        self._result = result

    def result(self) -> list[torch.Tensor]:
        self.wait()
        return self._result

    def get_future(self) -> torch.futures.Future[list[torch.Tensor]]:
        """Waits first: a caller in C++ (DDP's reducer) would block on the future without giving up the turn."""
        self.wait()
        future: torch.futures.Future[list[torch.Tensor]] = torch.futures.Future()
        future.set_result(self._result)
        return future


class CollectiveWork(_StrictWork):
    """One member's part of a collective, delivered at ``wait()``."""

    def __init__(self, world: SharedWorld, rank: int, seq: int, gathering: Gathering, record: PendingWork,
                 copies: list[tuple[torch.Tensor, torch.Tensor]], result: list[torch.Tensor],
                 earlier: list[CollectiveWork]) -> None:
        super().__init__(result)
        self._world, self._rank, self.seq = world, rank, seq
        self._gathering, self.record, self._copies = gathering, record, copies
        self._earlier = earlier  # this rank's undelivered work on the same group, in call order (shared list)
        self.delivered = False
        record.waiter = self.wait
        earlier.append(self)

    def wait(self, timeout: timedelta | None = None) -> bool:
        if self.delivered:
            return True
        state = self._world.ranks[self._rank]
        while not self._gathering.done:
            state.last, state.state = f"wait() on {self.record.what}", "waiting"
            self._world.turns.wait(self._rank)
            state.state = "running"
        for work in [w for w in self._earlier if w.seq <= self.seq]:
            work.deliver()
        return True

    def deliver(self) -> None:
        """Write the staged result into the rank's own tensors (the record goes first: with no other work
        pending the watch is off, and the copies do not pass through it)."""
        self.delivered = True
        self._earlier.remove(self)
        self._world.pending[self._rank].remove(self.record)
        with internal():
            for tensor, copy in self._copies:
                tensor.copy_(copy)

    def is_completed(self) -> bool:
        return self._gathering.done


class P2PWork(_StrictWork):
    """A send or receive, complete once matched (and, for a receive, delivered at ``wait()``)."""

    def __init__(self, world: SharedWorld, request: Request, record: PendingWork,
                 group_rank_of: Callable[[int], int]) -> None:
        super().__init__([request.tensor])
        self._world, self.request, self.record = world, request, record
        self._group_rank_of = group_rank_of
        self.delivered = False
        record.waiter = self.wait

    def wait(self, timeout: timedelta | None = None) -> bool:
        if self.delivered:
            return True
        request, world = self.request, self._world
        state = world.ranks[request.rank]
        while not request.matched:
            world.blocked[request.rank] = Blocked(None if request.any_source else request.peers[0], request)
            try:
                cycle = find_cycle(world.blocked, request.rank)
                if cycle:
                    reason = deadlock_report(cycle, world.blocked, world.world_size)
                    world.turns.abort(reason)
                    raise WorldAborted(reason)
                state.last, state.state = request.text(), "waiting"
                world.turns.wait(request.rank)
                state.state = "running"
            finally:
                world.blocked.pop(request.rank, None)
        if request.kind == "recv":
            assert request.data is not None
            with internal():
                request.tensor.copy_(request.data)
        self.delivered = True
        world.pending[request.rank].remove(self.record)
        return True

    def _source_rank(self) -> int:
        """The sender's rank in the group (``recv`` without ``src`` returns it)."""
        self.wait()
        return self._group_rank_of(self.request.source)

    def is_completed(self) -> bool:
        return self.request.matched


class AllWork(_StrictWork):
    """Several works as one (the coalesced collectives)."""

    def __init__(self, works: Sequence[dist.Work], result: list[torch.Tensor]) -> None:
        super().__init__(result)
        self._works = works

    def wait(self, timeout: timedelta | None = None) -> bool:
        for work in self._works:
            work.wait()
        return True

    def is_completed(self) -> bool:
        return all(work.is_completed() for work in self._works)
