"""How a filled collective computes its result: once, in group-rank order, then copied to every member.

The documented order: a reduction is the left fold ``((x0 op x1) op x2) ... op x(n-1)`` over the members'
tensors in group-rank order, computed in the tensors' own dtype; ``AVG`` is that ``SUM`` divided by the
group size (true division for floating types, floor division for integers, as torch's ``div``). The same
inputs give the same bits whatever order the ranks arrived in, and on every run.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch
from torch.distributed import ReduceOp


class UnsupportedCollective(Exception):
    """A collective or option the simulated process group does not provide; the message names it."""


_FOLDS: dict[str, Callable[[torch.Tensor, torch.Tensor], torch.Tensor]] = {
    "SUM": torch.add,
    "AVG": torch.add,
    "PRODUCT": torch.mul,
    "MAX": torch.maximum,
    "MIN": torch.minimum,
    "BAND": torch.bitwise_and,
    "BOR": torch.bitwise_or,
    "BXOR": torch.bitwise_xor,
}


def op_name(op: object) -> str:
    """``ReduceOp.SUM`` (or its ``RedOpType``, as options carry it) as ``"SUM"``."""
    kind = getattr(op, "op", op)  # a ReduceOp wraps its RedOpType
    for name in _FOLDS:
        if kind == getattr(ReduceOp, name) or kind == getattr(ReduceOp.RedOpType, name):
            return name
    raise UnsupportedCollective(
        f"reduction {op!r} is not supported by simulated ranks (supported: {', '.join(_FOLDS)}); "
        "run the case with --dmlbench-launcher fork"
    )


def reduce_in_rank_order(tensors: Sequence[torch.Tensor], op: str) -> torch.Tensor:
    """The fold of ``tensors`` (group-rank order) under ``op`` as a new tensor."""
    fold = _FOLDS[op]
    result = tensors[0].clone()
    if op in ("SUM", "AVG"):
        for tensor in tensors[1:]:
            result.add_(tensor)
    else:
        for tensor in tensors[1:]:
            result = fold(result, tensor)
    if op == "AVG":
        if result.is_floating_point() or result.is_complex():
            result.div_(len(tensors))
        else:
            result = torch.div(result, len(tensors), rounding_mode="floor")
    return result


def describe(tensor: torch.Tensor) -> str:
    """``float64[4, 8]``: what a collective is given, for matching and for reports."""
    dtype = str(tensor.dtype).removeprefix("torch.")
    return f"{dtype}[{', '.join(str(d) for d in tensor.shape)}]"


def describe_all(tensors: Sequence[torch.Tensor]) -> str:
    return ", ".join(describe(t) for t in tensors) if len(tensors) <= 4 else (
        f"{len(tensors)} tensors of {sum(t.numel() for t in tensors)} elements "
        f"({', '.join(sorted({str(t.dtype).removeprefix('torch.') for t in tensors}))})")


def copy_all(outputs: Sequence[torch.Tensor], sources: Sequence[torch.Tensor]) -> None:
    """``outputs[i].copy_(sources[i])`` in one call."""
    if outputs:
        torch._foreach_copy_(list(outputs), list(sources))
