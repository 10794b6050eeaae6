"""One list of collective-semantics cases, run on forked gloo ranks and on simulated ranks alike
(``test_gloo_semantics.py``): bad sizes, dtypes, ranks and groups, each made on every rank of a 2-rank world, so
that every rank raises at its own call (a rank that went on into the collective would wait for the others).

Each case is ``call(rank, world_size)``; what a rank got is :func:`outcome` of it. Imports only torch: the
file is copied into the inner pytest runs.
"""

from __future__ import annotations

import re
from collections.abc import Callable

import torch
import torch.distributed as td

Z = torch.zeros
F64 = torch.float64


def _scatter_root_list(rank: int, tensors: list[torch.Tensor]) -> None:
    """The source passes ``tensors``; the other rank passes a list too, which torch refuses on a non-source."""
    td.scatter(Z(2), tensors if rank == 0 else [Z(2), Z(2)], src=0)


def _gather_root_list(rank: int, tensors: list[torch.Tensor]) -> None:
    td.gather(Z(2), tensors if rank == 0 else [Z(2), Z(2)], dst=0)


def _not_in_group(rank: int, ws: int) -> None:
    only_first = td.new_group([0])
    if rank == 0:
        assert isinstance(only_first, td.ProcessGroup)
        td.broadcast(Z(2), src=1, group=only_first)
    else:  # torch annotates group as a ProcessGroup; a non-member's is NON_GROUP_MEMBER, the input under test
        td.all_reduce(Z(2), group=only_first)  # type: ignore[arg-type]


CASES: dict[str, Callable[[int, int], object]] = {
    # sizes
    "all_gather_into_tensor output not world_size inputs": lambda r, ws: td.all_gather_into_tensor(Z(2 * ws + 1), Z(2)),
    "all_gather_into_tensor output too short": lambda r, ws: td.all_gather_into_tensor(Z(1), Z(2)),
    "all_gather_into_tensor stacked output": lambda r, ws: td.all_gather_into_tensor(Z(ws, 2, 3), Z(2, 3)),
    "all_gather_into_tensor other trailing size": lambda r, ws: td.all_gather_into_tensor(Z(2 * ws, 3), Z(2, 2)),
    "all_gather list longer than the world": lambda r, ws: td.all_gather([Z(2) for _ in range(ws + 1)], Z(2)),
    "all_gather list tensor of another size": lambda r, ws: td.all_gather([Z(3, 2) for _ in range(ws)], Z(2, 2)),
    "reduce_scatter_tensor input not world_size outputs":
        lambda r, ws: td.reduce_scatter_tensor(Z(2), Z(2 * ws + 1)),
    "reduce_scatter_tensor other trailing size": lambda r, ws: td.reduce_scatter_tensor(Z(2, 3), Z(2 * ws, 2)),
    "reduce_scatter list shorter than the world": lambda r, ws: td.reduce_scatter(Z(2), [Z(2)]),
    "reduce_scatter list tensor of another size": lambda r, ws: td.reduce_scatter(Z(2), [Z(3) for _ in range(ws)]),
    "all_to_all input list longer than the world":
        lambda r, ws: td.all_to_all([Z(2) for _ in range(ws)], [Z(2) for _ in range(ws + 1)]),
    "all_to_all output list longer than the world":
        lambda r, ws: td.all_to_all([Z(2) for _ in range(ws + 1)], [Z(2) for _ in range(ws)]),
    "all_to_all tensors of other sizes":
        lambda r, ws: td.all_to_all([Z(3) for _ in range(ws)], [Z(2) for _ in range(ws)]),
    "all_to_all_single not divisible": lambda r, ws: td.all_to_all_single(Z(2 * ws + 1), Z(2 * ws + 1)),
    "all_to_all_single splits not summing":
        lambda r, ws: td.all_to_all_single(Z(2 * ws), Z(2 * ws), [1] * ws, [1] * ws),
    "all_to_all_single splits not world_size":
        lambda r, ws: td.all_to_all_single(Z(2 * ws), Z(2 * ws), [2] * (ws + 1), [2] * (ws + 1)),
    "all_to_all_single output of another size": lambda r, ws: td.all_to_all_single(Z(2 * ws + 2), Z(2 * ws)),
    "scatter list longer than the world": lambda r, ws: _scatter_root_list(r, [Z(2) for _ in range(ws + 1)]),
    "scatter list tensor of another size": lambda r, ws: _scatter_root_list(r, [Z(3) for _ in range(ws)]),
    "gather list longer than the world": lambda r, ws: _gather_root_list(r, [Z(2) for _ in range(ws + 1)]),
    "gather list tensor of another size": lambda r, ws: _gather_root_list(r, [Z(3) for _ in range(ws)]),
    # dtypes
    "all_gather_into_tensor output of another dtype":
        lambda r, ws: td.all_gather_into_tensor(Z(2 * ws, dtype=F64), Z(2)),
    "all_gather_into_tensor int64 output, int32 input":
        lambda r, ws: td.all_gather_into_tensor(Z(2 * ws, dtype=torch.int64), Z(2, dtype=torch.int32)),
    "all_gather list of another dtype": lambda r, ws: td.all_gather([Z(2, dtype=F64) for _ in range(ws)], Z(2)),
    "reduce_scatter_tensor output of another dtype": lambda r, ws: td.reduce_scatter_tensor(Z(2, dtype=F64), Z(2 * ws)),
    "all_reduce BAND of floats": lambda r, ws: td.all_reduce(Z(2), op=td.ReduceOp.BAND),
    "all_reduce BXOR of floats": lambda r, ws: td.all_reduce(Z(2), op=td.ReduceOp.BXOR),
    "all_reduce MAX of complex": lambda r, ws: td.all_reduce(Z(2, dtype=torch.complex64), op=td.ReduceOp.MAX),
    "all_reduce_coalesced mixed dtypes": lambda r, ws: td.all_reduce_coalesced([Z(2), Z(2, dtype=F64)]),
    "all_to_all_single mixed dtypes": lambda r, ws: td.all_to_all_single(Z(2 * ws, dtype=F64), Z(2 * ws)),
    # ranks
    "broadcast from a rank past the world": lambda r, ws: td.broadcast(Z(2), src=ws),
    "broadcast from rank -1": lambda r, ws: td.broadcast(Z(2), src=-1),
    "reduce to a rank past the world": lambda r, ws: td.reduce(Z(2), dst=ws),
    "scatter from a rank past the world": lambda r, ws: td.scatter(Z(2), None, src=ws),
    "gather to a rank past the world": lambda r, ws: td.gather(Z(2), None, dst=ws),
    "send to oneself": lambda r, ws: td.send(Z(2), dst=r),
    # groups
    "new_group with a rank past the world": lambda r, ws: td.new_group([0, ws]),
    "broadcast from a rank outside the group, a non-member's all_reduce": _not_in_group,
    # point to point
    "recv without src returns the sender": lambda r, ws: td.recv(Z(1)) if r == 0 else td.send(Z(1), dst=0),
}

_GLOO_PREFIX = re.compile(r"^\[rank\d+\]:\[[A-Z]\d{4} [^\]]*\] |^\[enforce fail at [^\]]*\] ")
_OBJECT = re.compile(r"<[\w.]+ object at 0x[0-9a-f]+>")  # a group's repr: its class is the backend's


def outcome(call: Callable[[int, int], object], rank: int, world_size: int) -> str:
    """``returned`` (and the value, if any), or the exception's type and first line (gloo's log prefix and object
    addresses taken off)."""
    try:
        value = call(rank, world_size)
    except Exception as exc:  # the exception, type and message, is the record
        lines = str(exc).strip().splitlines() or [""]
        return f"{type(exc).__name__}: {_OBJECT.sub('<object>', _GLOO_PREFIX.sub('', lines[0]))}"
    return "returned" if value is None else f"returned {value!r}"
