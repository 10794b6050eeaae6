"""The one place every strategy's communication goes through.

Each wrapper forwards to the matching ``torch.distributed`` call and, on the way, adds the bytes of the
tensors it was handed to the active :class:`ByteCount` and hands the call to the installed
:data:`Interceptor` (``None`` by default). Measurement code times collectives by installing an
interceptor with :func:`set_interceptor`; it receives the operation name, the payload bytes and a
zero-argument callable that performs the operation, and must return that callable's result.

Bytes are counted as the payload handed to the operation on this rank: the tensor of ``all_reduce``,
``broadcast``, ``send`` and ``recv`` (the receive buffer), the input of ``all_gather`` and ``gather``.

DDP's built-in reducer calls ``torch.distributed`` itself; :func:`routed_torch_all_reduce` redirects
``torch.distributed.all_reduce`` through :func:`all_reduce` for the duration of a step, so torch's own
communication hooks (allreduce, fp16, PowerSGD) are counted and intercepted as well.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.distributed as dist

Interceptor = Callable[[str, int, Callable[[], Any]], Any]

_interceptor: Interceptor | None = None
_route_depth = 0
_routed_downstream: Callable[..., Any] | None = None  # what ``dist.all_reduce`` was before routing
_counts: list[ByteCount] = []
_counts_lock = threading.Lock()


@dataclass
class ByteCount:
    """Bytes handed to communication operations while this count was active, total and per operation."""

    total: int = 0
    by_op: dict[str, int] = field(default_factory=dict)

    def add(self, op: str, nbytes: int) -> None:
        self.total += nbytes
        self.by_op[op] = self.by_op.get(op, 0) + nbytes


def set_interceptor(interceptor: Interceptor | None) -> Interceptor | None:
    """Install ``interceptor`` for every later operation (``None`` removes it); returns the previous one."""
    global _interceptor
    previous, _interceptor = _interceptor, interceptor
    return previous


@contextlib.contextmanager
def counting() -> Iterator[ByteCount]:
    """Count the bytes of every operation issued (from any thread) while the block runs."""
    count = ByteCount()
    with _counts_lock:
        _counts.append(count)
    try:
        yield count
    finally:
        with _counts_lock:
            _counts.remove(count)


def nbytes(tensors: torch.Tensor | list[torch.Tensor]) -> int:
    """Payload bytes of a tensor or a list of tensors."""
    if isinstance(tensors, torch.Tensor):
        return tensors.numel() * tensors.element_size()
    return sum(t.numel() * t.element_size() for t in tensors)


def account(op: str, size: int) -> None:
    """Add ``size`` bytes of ``op`` to the active counts, for communication issued outside this module."""
    with _counts_lock:
        for count in _counts:
            count.add(op, size)


def _run(op: str, size: int, call: Callable[[], Any]) -> Any:
    account(op, size)
    if _interceptor is None:
        return call()
    return _interceptor(op, size, call)


def issue(op: str, size: int, call: Callable[[], Any]) -> Any:
    """Count ``size`` bytes of ``op`` and run ``call`` through the interceptor: for communication issued by
    another library's backend that a strategy routes through this module (DeepSpeed's ``deepspeed.comm``)."""
    return _run(op, size, call)


def all_reduce(
    tensor: torch.Tensor,
    op: dist.ReduceOp.RedOpType = dist.ReduceOp.SUM,
    group: dist.ProcessGroup | None = None,
    async_op: bool = False,
) -> Any:
    """``torch.distributed.all_reduce``, counted and interceptable."""
    downstream = _routed_downstream if _routed_downstream is not None else dist.all_reduce
    return _run(
        "all_reduce",
        nbytes(tensor),
        lambda: downstream(tensor, op=op, group=group, async_op=async_op),
    )


def broadcast(tensor: torch.Tensor, src: int, group: dist.ProcessGroup | None = None, async_op: bool = False) -> Any:
    """``torch.distributed.broadcast`` (``src`` is a global rank), counted and interceptable."""
    return _run("broadcast", nbytes(tensor), lambda: dist.broadcast(tensor, src, group=group, async_op=async_op))


def all_gather(tensors: list[torch.Tensor], tensor: torch.Tensor, group: dist.ProcessGroup | None = None) -> Any:
    """``torch.distributed.all_gather``, counted and interceptable."""
    return _run("all_gather", nbytes(tensor), lambda: dist.all_gather(tensors, tensor, group=group))


def gather(
    tensor: torch.Tensor,
    gather_list: list[torch.Tensor] | None,
    dst: int,
    group: dist.ProcessGroup | None = None,
) -> Any:
    """``torch.distributed.gather`` (``gather_list`` only on ``dst``), counted and interceptable."""
    return _run("gather", nbytes(tensor), lambda: dist.gather(tensor, gather_list, dst=dst, group=group))


def isend(tensor: torch.Tensor, dst: int, group: dist.ProcessGroup | None = None) -> Any:
    """``torch.distributed.isend``: returns the work handle to wait on; counted and interceptable."""
    return _run("send", nbytes(tensor), lambda: dist.isend(tensor, dst, group=group))


def recv(tensor: torch.Tensor, src: int, group: dist.ProcessGroup | None = None) -> Any:
    """``torch.distributed.recv`` into ``tensor``, counted and interceptable."""
    return _run("recv", nbytes(tensor), lambda: dist.recv(tensor, src, group=group))


@contextlib.contextmanager
def routed_torch_all_reduce() -> Iterator[None]:
    """Send ``torch.distributed.all_reduce`` calls made by torch's own code through :func:`all_reduce`.

    Used around DDP steps so that communication hooks shipped with torch are counted and intercepted.
    Whatever ``torch.distributed.all_reduce`` is when the block starts (torch's function, or a wrapper that
    other instrumentation installed) stays downstream of :func:`all_reduce` and is put back at the end.
    Nested use is allowed.
    """
    global _route_depth, _routed_downstream
    with _counts_lock:
        _route_depth += 1
        if _route_depth == 1:
            _routed_downstream = dist.all_reduce
            dist.all_reduce = all_reduce  # type: ignore[assignment]
    try:
        yield
    finally:
        with _counts_lock:
            _route_depth -= 1
            if _route_depth == 0:
                if dist.all_reduce is all_reduce:
                    dist.all_reduce = _routed_downstream  # type: ignore[assignment]
                _routed_downstream = None
