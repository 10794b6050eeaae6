"""The simulated ranks' process group: a Python ``ProcessGroup`` whose collectives wait for the other
members by giving up the turn, and complete once for the whole group.

Registered as the ``simulated`` backend (``Backend.register_backend(..., extended_api=True)``); every
collective completes before its call returns (asynchronous forms hand back finished work), except a
receive, whose work waits for its message when it is waited on. In strict mode (``SharedWorld.strict``) a
call's work completes at ``wait()`` instead (``strict_work``), and sends complete when matched (``p2p_strict``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import timedelta
from typing import Any

import torch
import torch.distributed as dist

from pytest_dmlbench.world.simulated import gloo_checks as check
from pytest_dmlbench.world.simulated import reduction as red
from pytest_dmlbench.world.simulated.p2p_strict import Request
from pytest_dmlbench.world.simulated.pending import PendingWork, call_site, internal, poison
from pytest_dmlbench.world.simulated.reduction import UnsupportedCollective, describe, describe_all
from pytest_dmlbench.world.simulated.rendezvous import Call, CollectiveMismatch, Gathering, GroupState
from pytest_dmlbench.world.simulated.shared import SharedWorld
from pytest_dmlbench.world.simulated.strict_work import AllWork, CollectiveWork, P2PWork, flat_tensors, staged
from pytest_dmlbench.world.simulated.turns import WorldAborted

BACKEND_NAME = "simulated"


class _Active:
    """The simulated world cases run in now (one at a time per process)."""

    world: SharedWorld | None = None


ACTIVE = _Active()


class DoneWork(dist.Work):
    """Work that finished when it was made; its future holds ``result``."""

    def __init__(self, result: list[torch.Tensor]) -> None:
        super().__init__()
        self._result = result

    def wait(self, timeout: timedelta | None = None) -> bool:
        return True

    def is_completed(self) -> bool:
        return True

    def result(self) -> list[torch.Tensor]:
        return self._result

    def get_future(self) -> torch.futures.Future[list[torch.Tensor]]:
        future: torch.futures.Future[list[torch.Tensor]] = torch.futures.Future()
        future.set_result(self._result)
        return future


class ReceiveWork(DoneWork):
    """A receive: waiting on it waits (gives up the turn) until the message is there; its source rank (in the
    group) is then known, as gloo's receive work tells it (``recv`` without ``src`` returns it)."""

    def __init__(self, receive: Callable[[], int], tensors: list[torch.Tensor]) -> None:
        super().__init__(tensors)
        self._receive: Callable[[], int] | None = receive
        self._source = -1

    def wait(self, timeout: timedelta | None = None) -> bool:
        if self._receive is not None:
            receive, self._receive = self._receive, None
            self._source = receive()
        return True

    def _source_rank(self) -> int:
        self.wait()
        return self._source

    def is_completed(self) -> bool:
        return self._receive is None

    def get_future(self) -> torch.futures.Future[list[torch.Tensor]]:
        self.wait()
        return super().get_future()


class SimulatedProcessGroup(dist.ProcessGroup):
    """One rank's view of one group of a simulated world."""

    def __init__(self, world: SharedWorld, group: GroupState, group_rank: int) -> None:
        super().__init__(group_rank, len(group.members))  # type: ignore[call-arg]
        self._world = world
        self._group = group
        self._group_rank = group_rank
        self._global_rank = group.members[group_rank]
        self._seq = 0
        self._description = ""
        self._undelivered: list[CollectiveWork] = []  # strict mode: this rank's collectives not yet waited for

    def getBackendName(self) -> str:
        return BACKEND_NAME

    # the group's name and description: a Python group has no backend to keep them (DeviceMesh reads the name)
    def getGroupName(self) -> str:
        return self._group.name

    def setGroupName(self, name: str) -> None:
        """The name is the one the group was created with."""

    def getGroupDesc(self) -> str:
        return self._description

    def setGroupDesc(self, description: str) -> None:
        self._description = description

    def _get_backend(self, device: Any) -> SimulatedProcessGroup:  # type: ignore[override]
        """The group is its own backend (``batch_isend_irecv`` asks it whether it coalesces: it does not)."""
        return self

    @property
    def _device_types(self) -> list[torch.device]:
        return [torch.device("cpu")]

    # -- the one path every collective takes -----------------------------------------------------------------
    def _collective(self, opts: Any, kind: str, detail: str, payload: Any, complete: Callable[[list[Any]], Any],
                    result: list[torch.Tensor], outputs: list[torch.Tensor] | None = None,
                    every: Sequence[torch.Tensor] = ()) -> dist.Work:
        """``opts``: the call's options (``asyncOp`` False: a blocking call); ``outputs``: the tensors the
        collective writes on this rank (default ``result``); ``every``: the tensors ``detail`` describes, each of
        whose dtype and shape strict mode compares across the group."""
        strict = self._world.strict
        # strict mode stages, poisons and watches only what the rank could touch before wait(): a blocking call
        # (torch.distributed's async_op=False) is waited for at once, so it runs as without strict mode; calls
        # from C++ (DDP's reducer, functional collectives) and any without options are taken as asynchronous
        pending = strict and getattr(opts, "asyncOp", True) is not False
        if strict:
            self._wait_for_pending_inputs(payload)
        self._seq += 1
        shapes = tuple(describe(t) for t in every) if strict and len(every) > 4 else ()
        call = Call(kind, detail, shapes)
        state = self._world.ranks[self._global_rank]
        state.last = f"{call} #{self._seq} on {self._group.label}"
        clones: dict[int, torch.Tensor] = {}
        written = result if outputs is None else outputs
        original = payload
        if pending:
            payload = staged(payload, clones)
            with internal():
                for tensor in written:
                    poison(tensor)
        gathering = self._arrive(call, payload, complete)
        if pending:
            return self._pending_collective(call, gathering, clones, result, written, original)
        if not gathering.done:
            state.state = "waiting"
            self._world.turns.wait(self._global_rank)
            state.state = "running"
        for work in list(self._undelivered):  # strict mode: earlier async work on the group is complete now
            work.deliver()
        return DoneWork(result)

    def _arrive(self, call: Call, payload: Any, complete: Callable[[list[Any]], Any]) -> Gathering:
        try:
            gathering = self._group.arrive(self._seq, self._group_rank, call, payload, complete)
        except CollectiveMismatch as exc:
            reason = f"{exc}. Every rank's last collective: {self._world.every_rank()}"
            self._world.turns.abort(reason)
            raise WorldAborted(reason) from None
        if gathering.done:
            for member in self._group.members:
                if member != self._global_rank:
                    self._world.turns.ready(member)
        return gathering

    def _pending_collective(self, call: Call, gathering: Gathering, clones: dict[int, torch.Tensor],
                            result: list[torch.Tensor], written: list[torch.Tensor], payload: Any) -> dist.Work:
        """Strict mode: the work of a collective this rank arrived at, delivered at ``wait()``."""
        copies = [(t, clones[id(t)]) for t in {id(t): t for t in written}.values()]
        outputs = {id(t) for t in written}
        inputs = [t for t in flat_tensors(payload) if id(t) not in outputs]
        record = PendingWork(self._world.ranks[self._global_rank].last, call_site(), written, inputs)
        self._world.pending[self._global_rank].add(record)
        return CollectiveWork(self._world, self._global_rank, self._seq, gathering, record, copies, result,
                              self._undelivered)

    def _wait_for_pending_inputs(self, payload: Any) -> None:
        """A tensor still pending from an earlier call, handed to a new one, gets its value first (NCCL orders
        the two on its stream; here the earlier work is waited for)."""
        works = self._world.pending[self._global_rank].works
        if not works:
            return
        tensors = list(flat_tensors(payload))
        for record in list(works):
            if record.waiter is not None and record.feeds(tensors):
                record.waiter()

    # -- reductions -------------------------------------------------------------------------------------------
    def allreduce(self, tensors: list[torch.Tensor], opts: Any = None) -> dist.Work:  # type: ignore[override]
        op = red.op_name(opts.reduceOp if opts is not None else dist.ReduceOp.SUM)
        check.reduction(op, tensors)

        def complete(parts: list[list[torch.Tensor]]) -> None:
            for i in range(len(parts[0])):
                total = red.reduce_in_rank_order([p[i] for p in parts], op)
                for part in parts:
                    part[i].copy_(total)

        return self._collective(opts, "all_reduce", f"{op}, {describe_all(tensors)}", tensors, complete, tensors,
                                every=tensors)

    def allreduce_coalesced(self, tensors: list[torch.Tensor], opts: Any = None) -> dist.Work:
        return self.allreduce(tensors, opts)

    def reduce(self, tensors: list[torch.Tensor], opts: Any) -> dist.Work:  # type: ignore[override]
        op, root = red.op_name(opts.reduceOp), opts.rootRank
        check.root("reduce", root, self.size())
        check.reduction(op, tensors)

        def complete(parts: list[list[torch.Tensor]]) -> None:
            parts[root][0].copy_(red.reduce_in_rank_order([p[0] for p in parts], op))

        return self._collective(opts, "reduce", f"{op}, root {root}, {describe_all(tensors)}", tensors, complete,
                                tensors, outputs=tensors if self._group_rank == root else [], every=tensors)

    def reduce_scatter(self, outputs: list[torch.Tensor], input_lists: list[list[torch.Tensor]],  # type: ignore[override]
                       opts: Any) -> dist.Work:
        op = red.op_name(opts.reduceOp)
        check.reduction(op, outputs)
        check.reduce_scatter(outputs[0], input_lists[0], self.size())

        def complete(parts: list[tuple[list[torch.Tensor], list[list[torch.Tensor]]]]) -> None:
            for member, (outs, _) in enumerate(parts):
                outs[0].copy_(red.reduce_in_rank_order([ins[0][member] for _, ins in parts], op))

        detail = f"{op}, {describe_all(input_lists[0])} -> {describe_all(outputs)}"
        return self._collective(opts, "reduce_scatter", detail, (outputs, input_lists), complete, outputs,
                                every=[*input_lists[0], *outputs])

    def _reduce_scatter_base(self, output: torch.Tensor, inp: torch.Tensor, opts: Any = None) -> dist.Work:
        op = red.op_name(opts.reduceOp if opts is not None else dist.ReduceOp.SUM)
        check.reduction(op, [inp])
        check.reduce_scatter_into(output, inp, self.size())

        def complete(parts: list[tuple[torch.Tensor, torch.Tensor]]) -> None:
            chunks = [i.reshape(len(parts), -1) for _, i in parts]
            total = red.reduce_in_rank_order(chunks, op)
            for member, (out, _) in enumerate(parts):
                out.copy_(total[member].reshape(out.shape))

        detail = f"{op}, {describe(inp)} -> {describe(output)}"
        return self._collective(opts, "reduce_scatter_tensor", detail, (output, inp), complete, [output])

    reduce_scatter_single = _reduce_scatter_base  # type: ignore[assignment]

    def reduce_scatter_tensor_coalesced(self, outputs: list[torch.Tensor], inputs: list[torch.Tensor],
                                        opts: Any = None) -> dist.Work:
        works = [self._reduce_scatter_base(out, inp, opts) for out, inp in zip(outputs, inputs, strict=True)]
        return AllWork(works, outputs) if self._world.strict else DoneWork(outputs)

    # -- data movement ---------------------------------------------------------------------------------------
    def broadcast(self, tensors: list[torch.Tensor], opts: Any) -> dist.Work:  # type: ignore[override]
        root = opts.rootRank
        check.root("broadcast", root, self.size())

        def complete(parts: list[list[torch.Tensor]]) -> None:
            for member, part in enumerate(parts):
                if member != root:
                    red.copy_all(part, parts[root])

        return self._collective(opts, "broadcast", f"root {root}, {describe_all(tensors)}", tensors, complete, tensors,
                                outputs=[] if self._group_rank == root else tensors, every=tensors)

    def allgather(self, output_lists: list[list[torch.Tensor]], inputs: list[torch.Tensor],  # type: ignore[override]
                  opts: Any = None) -> dist.Work:
        check.allgather(output_lists[0], inputs[0], self.size())

        def complete(parts: list[tuple[list[list[torch.Tensor]], list[torch.Tensor]]]) -> None:
            sources = [ins[0] for _, ins in parts]
            for outs, _ in parts:
                red.copy_all(outs[0], sources)

        detail = describe_all(inputs)
        return self._collective(opts, "all_gather", detail, (output_lists, inputs), complete, output_lists[0],
                                every=inputs)

    def _allgather_base(self, output: torch.Tensor, inp: torch.Tensor, opts: Any = None) -> dist.Work:
        check.allgather_into(output, inp, self.size())

        def complete(parts: list[tuple[torch.Tensor, torch.Tensor]]) -> None:
            whole = torch.cat([i.reshape(-1) for _, i in parts])
            for out, _ in parts:
                out.view(-1).copy_(whole)

        detail = f"{describe(inp)} -> {describe(output)}"
        return self._collective(opts, "all_gather_into_tensor", detail, (output, inp), complete, [output])

    all_gather_single = _allgather_base  # type: ignore[assignment]

    def allgather_into_tensor_coalesced(self, outputs: list[torch.Tensor], inputs: list[torch.Tensor],
                                        opts: Any = None) -> dist.Work:
        works = [self._allgather_base(out, inp, opts) for out, inp in zip(outputs, inputs, strict=True)]
        return AllWork(works, outputs) if self._world.strict else DoneWork(outputs)

    def gather(self, output_lists: list[list[torch.Tensor]], inputs: list[torch.Tensor], opts: Any) -> dist.Work:  # type: ignore[override]
        root = opts.rootRank
        check.root("gather", root, self.size())
        if self._group_rank == root:
            check.gather(output_lists[0] if output_lists else [], inputs[0], self.size())

        def complete(parts: list[tuple[list[list[torch.Tensor]], list[torch.Tensor]]]) -> None:
            red.copy_all(parts[root][0][0], [ins[0] for _, ins in parts])

        result = output_lists[0] if output_lists else []
        return self._collective(opts, "gather", f"root {root}, {describe_all(inputs)}", (output_lists, inputs),
                                complete, result, every=inputs)

    def scatter(self, outputs: list[torch.Tensor], input_lists: list[list[torch.Tensor]], opts: Any) -> dist.Work:  # type: ignore[override]
        root = opts.rootRank
        check.root("scatter", root, self.size())
        if self._group_rank == root:
            check.scatter(input_lists[0] if input_lists else [], outputs[0], self.size())

        def complete(parts: list[tuple[list[torch.Tensor], list[list[torch.Tensor]]]]) -> None:
            sources = parts[root][1][0]
            for member, (outs, _) in enumerate(parts):
                outs[0].copy_(sources[member])

        return self._collective(opts, "scatter", f"root {root}, {describe_all(outputs)}", (outputs, input_lists),
                                complete, outputs, every=outputs)

    def alltoall(self, outputs: list[torch.Tensor], inputs: list[torch.Tensor], opts: Any = None) -> dist.Work:
        check.alltoall(outputs, inputs, self.size())

        def complete(parts: list[tuple[list[torch.Tensor], list[torch.Tensor]]]) -> None:
            for member, (outs, _) in enumerate(parts):
                red.copy_all(outs, [ins[member] for _, ins in parts])

        return self._collective(opts, "all_to_all", f"{len(inputs)} tensors", (outputs, inputs), complete, outputs,
                                every=[*inputs, *outputs])

    def alltoall_base(self, output: torch.Tensor, inp: torch.Tensor, output_splits: list[int],
                      input_splits: list[int], opts: Any = None) -> dist.Work:
        size = len(self._group.members)
        check.alltoall_single(output, inp, output_splits, input_splits, size)

        def complete(parts: list[tuple[torch.Tensor, torch.Tensor, list[int], list[int]]]) -> None:
            pieces = [list(torch.split(i, isp if isp else [i.shape[0] // size] * size)) for _, i, _, isp in parts]
            for member, (out, _, osp, _) in enumerate(parts):
                red.copy_all(list(torch.split(out, osp if osp else [out.shape[0] // size] * size)),
                             [pieces[src][member] for src in range(size)])

        detail = f"{describe(inp)} -> {describe(output)}"
        return self._collective(opts, "all_to_all_single", detail, (output, inp, output_splits, input_splits), complete,
                                [output])

    all_to_all_single = alltoall_base  # type: ignore[assignment]

    def barrier(self, opts: Any = None) -> dist.Work:
        return self._collective(opts, "barrier", "", None, lambda parts: None, [])

    # -- point to point --------------------------------------------------------------------------------------
    def send(self, tensors: list[torch.Tensor], dst: int, tag: int) -> dist.Work:
        if self._world.strict:
            return self._post(Request("send", self._global_rank, (self._group.members[dst],), tag, tensors[0]))
        self._world.ranks[self._global_rank].last = f"send to rank {self._group.members[dst]} (tag {tag})"
        self._group.post(self._group_rank, dst, tag, tensors[0])
        self._world.turns.ready(self._group.members[dst])
        return DoneWork(tensors)

    def recv(self, tensors: list[torch.Tensor], src: int, tag: int) -> dist.Work:
        if self._world.strict:
            return self._post(Request("recv", self._global_rank, (self._group.members[src],), tag, tensors[0]))
        return ReceiveWork(lambda: self._receive(tensors[0], (src,), tag), tensors)

    def recv_anysource(self, tensors: list[torch.Tensor], tag: int) -> dist.Work:
        if self._world.strict:
            return self._post(Request("recv", self._global_rank, self._group.members, tag, tensors[0],
                                      any_source=True))
        return ReceiveWork(lambda: self._receive(tensors[0], tuple(range(self.size())), tag), tensors)

    def _post(self, request: Request) -> P2PWork:
        """Strict mode: post a send or receive; its work completes when a call of the peer matches it."""
        tensor = request.tensor
        receiving = request.kind == "recv"
        if not receiving:
            self._wait_for_pending_inputs([tensor])
        self._world.ranks[self._global_rank].last = request.text()
        if receiving:
            with internal():
                poison(tensor)
        matched = self._group.matcher.post(request)
        if matched is not None:
            self._world.turns.ready(matched.rank)
        record = PendingWork(f"{request.text()} on {self._group.label}", call_site(),
                             [tensor] if receiving else [], [] if receiving else [tensor])
        self._world.pending[self._global_rank].add(record)
        return P2PWork(self._world, request, record, self._group.members.index)

    def _receive(self, tensor: torch.Tensor, srcs: Sequence[int], tag: int) -> int:
        """Wait for a message from one of ``srcs`` (group ranks, lowest first); copy it in; its source."""
        state = self._world.ranks[self._global_rank]
        source = f"rank {self._group.members[srcs[0]]}" if len(srcs) == 1 else "any rank"
        state.last = f"recv from {source} (tag {tag}, {describe(tensor)})"
        while (message := self._group.take(tuple(srcs), self._group_rank, tag)) is None:
            state.state = "waiting"
            self._world.turns.wait(self._global_rank)
            state.state = "running"
        tensor.copy_(message[1])
        return message[0]

    # -- coalescing (batch_isend_irecv): every call already completes on its own ------------------------------
    def start_coalescing(self, device: Any = None) -> None:
        return None

    def end_coalescing(self, device: Any = None) -> DoneWork:
        return DoneWork([])


def create(options: Any, backend_options: Any = None) -> SimulatedProcessGroup:
    """The ``simulated`` backend's creator (torch's extended API): this rank's group of the active world."""
    world = ACTIVE.world
    if world is None:
        raise UnsupportedCollective(
            "the 'simulated' backend exists only inside a case run on simulated ranks "
            "(--dmlbench-launcher simulated, or @pytest.mark.dmlbench(launcher=\"simulated\"))"
        )
    members = list(options.global_ranks_in_group) or list(range(options.group_size))
    group = world.group(str(options.group_id), members)
    return SimulatedProcessGroup(world, group, options.group_rank)


def register_backend() -> None:
    """Register the ``simulated`` backend with torch once per process."""
    if BACKEND_NAME.upper() not in dist.Backend._plugins:
        dist.Backend.register_backend(BACKEND_NAME, create, extended_api=True, devices=["cpu"])
