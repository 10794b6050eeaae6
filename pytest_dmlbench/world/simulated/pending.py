"""Strict mode's asynchronous work: tensors a rank handed to a collective or a point-to-point call and has not
waited for yet, their poison, and the watch that catches a read or a write of them before ``wait()``.

As on NCCL, an output (an async collective's result, a receive's buffer) holds no value until the work is
waited for: strict mode fills it with a poison value (NaN, the integer type's lowest value, ``True``) at the
call and writes the result at ``wait()``. While a rank has work pending, a ``TorchFunctionMode`` of that
rank's thread checks every torch call's tensors against the pending ones (by memory range, so views count):
reading or writing a pending output, or writing a pending input (a send's buffer, a collective's input),
raises :class:`PendingTensorAccess` on that rank, at that line, naming the tensor and the operation. Reading
an input (a send's buffer) before ``wait()`` is allowed, as on NCCL. Metadata (shape, dtype, views) is not
an access.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from types import FrameType
from typing import Any

import torch
from torch.overrides import TorchFunctionMode

from pytest_dmlbench.world.simulated.reduction import describe


class PendingTensorAccess(RuntimeError):
    """A rank read or wrote a tensor of work it had not waited for; the message names both."""


_SIMULATED_DIR = __file__.rsplit("/", 1)[0]
_TORCH_DIR = torch.__file__.rsplit("/", 1)[0]


def call_site() -> str:
    """``file:line`` of the innermost frame outside torch and the simulated world: where the case made the call."""
    frame: FrameType | None = sys._getframe(1)
    while frame is not None and frame.f_code.co_filename.startswith((_SIMULATED_DIR, _TORCH_DIR)):
        frame = frame.f_back
    return "" if frame is None else f"{frame.f_code.co_filename}:{frame.f_lineno}"


def poison(tensor: torch.Tensor) -> None:
    """Fill ``tensor`` with a value no computation should produce: what NCCL's buffer holds before the result."""
    if tensor.dtype == torch.bool:
        tensor.fill_(True)
    elif tensor.is_floating_point() or tensor.is_complex():
        tensor.fill_(float("nan"))
    else:
        tensor.fill_(torch.iinfo(tensor.dtype).min)


def _extent(tensor: torch.Tensor) -> tuple[int, int] | None:
    """The byte range ``tensor``'s elements occupy (None: no storage of its own, or empty)."""
    if type(tensor) not in _PLAIN or tensor.numel() == 0:
        return None
    start = tensor.data_ptr()
    if start == 0:
        return None
    if tensor.is_contiguous():
        return start, start + tensor.numel() * tensor.element_size()
    last = sum((size - 1) * stride for size, stride in zip(tensor.shape, tensor.stride(), strict=True))
    return start, start + (last + 1) * tensor.element_size()


_PLAIN = (torch.Tensor, torch.nn.Parameter, torch.nn.Buffer)
Located = tuple[torch.Tensor, tuple[int, int]]  # a pending tensor and the byte range of its elements


class PendingWork:
    """Tensors of one call a rank has not waited for: ``outputs`` (no value yet) and ``inputs`` (still read)."""

    def __init__(self, what: str, site: str, outputs: Iterable[torch.Tensor], inputs: Iterable[torch.Tensor]) -> None:
        self.what = what  # e.g. "all_reduce(SUM, float32[4]) #2 on the default group"
        self.site = site
        self._tensors = (list(outputs), list(inputs))
        self._extents: tuple[list[Located], list[Located]] | None = None
        self.waiter: Callable[[], object] | None = None  # waits for the work (set by the work object)

    @property
    def outputs(self) -> list[Located]:
        return self._located()[0]

    @property
    def inputs(self) -> list[Located]:
        return self._located()[1]

    def _located(self) -> tuple[list[Located], list[Located]]:
        """The tensors with their byte ranges, found at the first check: a call waited for at once (every
        blocking collective) is never checked, so it never pays for them."""
        if self._extents is None:
            outputs, inputs = self._tensors
            self._extents = ([(t, e) for t in outputs if (e := _extent(t)) is not None],
                             [(t, e) for t in inputs if (e := _extent(t)) is not None])
        return self._extents

    def feeds(self, tensors: Iterable[torch.Tensor]) -> bool:
        """Whether one of ``tensors`` (handed to a new call) overlaps an output of this work."""
        return any((e := _extent(t)) is not None and self.overlaps(e, written=False) is not None for t in tensors)

    def overlaps(self, extent: tuple[int, int], *, written: bool) -> torch.Tensor | None:
        """The pending tensor ``extent`` touches: any output, or an input when it is written."""
        start, end = extent
        for tensor, (lo, hi) in self.outputs:
            if start < hi and lo < end:
                return tensor
        if written:
            for tensor, (lo, hi) in self.inputs:
                if start < hi and lo < end:
                    return tensor
        return None


# Calls that read no element: metadata and views (a view of a pending tensor is checked where it is used)
_NOT_ACCESS = frozenset({
    "size", "dim", "numel", "nelement", "ndimension", "stride", "storage_offset", "is_contiguous", "element_size",
    "data_ptr", "untyped_storage", "is_complex", "is_floating_point", "is_signed", "get_device", "is_pinned",
    "is_shared", "is_set_to", "type", "__get__", "__len__", "__hash__",
    "view", "view_as", "reshape", "reshape_as", "as_strided", "narrow", "select", "split", "chunk", "unbind",
    "split_with_sizes", "tensor_split", "flatten", "unflatten", "squeeze", "unsqueeze", "expand", "expand_as",
    "t", "transpose", "permute", "movedim", "detach", "view_as_real", "view_as_complex", "__getitem__",
    "requires_grad_", "retain_grad", "register_hook", "_is_view", "_base", "is_leaf", "has_names",
    "wait_tensor",  # torch's wait for a functional collective's output: it waits for the work
    "_typed_storage", "storage", "share_memory_", "is_meta", "is_inference",
})
_WRITE_DUNDERS = frozenset({"__setitem__", "__set__", "__iadd__", "__isub__", "__imul__", "__itruediv__",
                            "__ifloordiv__", "__imod__", "__ipow__", "__iand__", "__ior__", "__ixor__",
                            "__ilshift__", "__irshift__", "__imatmul__"})


def _name(func: Callable[..., Any]) -> str:
    return str(getattr(func, "__name__", ""))


def _tensors(value: Any) -> Iterator[torch.Tensor]:
    if isinstance(value, torch.Tensor):
        yield value
    elif isinstance(value, (list, tuple)):
        for item in value:
            if isinstance(item, torch.Tensor):
                yield item


class _Internal(threading.local):
    depth = 0


_INTERNAL = _Internal()


@contextmanager
def internal() -> Iterator[None]:
    """The simulated world's own work on pending tensors (poison, delivery): not the case's access."""
    _INTERNAL.depth += 1
    try:
        yield
    finally:
        _INTERNAL.depth -= 1


_DISTRIBUTED = "torch.distributed"  # its calls reach the process group, which orders pending tensors itself
# torch's own operators on collective outputs (wait_tensor, DTensor's wrapping): they wait where they must
_DISTRIBUTED_OPS = ("_c10d_functional", "_c10d_functional_autograd", "c10d", "_dtensor")


def _distributed(func: Callable[..., Any]) -> bool:
    namespace = getattr(func, "namespace", None)
    if namespace is not None:
        return str(namespace) in _DISTRIBUTED_OPS
    return str(getattr(func, "__module__", "")).startswith(_DISTRIBUTED)


class _Watch(TorchFunctionMode):
    """Checks each torch call of its rank's thread against that rank's pending work."""

    def __init__(self, pending: RankPending) -> None:
        super().__init__()
        self.pending = pending

    def __torch_function__(self, func: Callable[..., Any], types: Any, args: Any = (), kwargs: Any = None) -> Any:
        kwargs = kwargs or {}
        if self.pending.works and not _INTERNAL.depth:
            name = _name(func)
            if name not in _NOT_ACCESS and not _distributed(func):
                self._check(func, name, args, kwargs)
        return func(*args, **kwargs)

    def _check(self, func: Callable[..., Any], name: str, args: Any, kwargs: dict[str, Any]) -> None:
        in_place = name in _WRITE_DUNDERS or (name.endswith("_") and not name.endswith("__"))
        written = list(_tensors(kwargs.get("out")))
        if in_place and args:
            written.extend(_tensors(args[0]))
        for tensor in written:
            self.pending.check(tensor, func, written=True)
        for value in (*args, *kwargs.values()):
            for tensor in _tensors(value):
                self.pending.check(tensor, func, written=False)


class RankPending:
    """One rank's pending work, and the watch that is on while there is any."""

    def __init__(self, rank: int) -> None:
        self.rank = rank
        self.works: list[PendingWork] = []
        self.violation = ""  # the first access reported, kept in case the case caught the exception
        self._watch = _Watch(self)
        self._watching = False

    def add(self, work: PendingWork) -> None:
        self.works.append(work)
        if not self._watching:
            self._watch.__enter__()  # type: ignore[no-untyped-call]  # torch leaves it untyped
            self._watching = True

    def remove(self, work: PendingWork) -> None:
        if work in self.works:
            self.works.remove(work)
        if not self.works and self._watching and _top_mode() is self._watch:
            self._watch.__exit__(None, None, None)
            self._watching = False  # else the case pushed a mode of its own above: the watch stays, idle

    def close(self) -> None:
        """The rank's body ended: take the watch off its thread's mode stack wherever it is."""
        self.works.clear()
        if self._watching and _top_mode() is self._watch:
            self._watch.__exit__(None, None, None)
            self._watching = False

    def check(self, tensor: torch.Tensor, func: Callable[..., Any], *, written: bool) -> None:
        extent = _extent(tensor)
        if extent is None:
            return
        for work in self.works:
            hit = work.overlaps(extent, written=written)
            if hit is not None:
                role = "output" if any(hit is t for t, _ in work.outputs) else "input"
                action = "wrote" if written else "read"
                raise self._violation(
                    f"strict mode: rank {self.rank} {action} a tensor ({describe(tensor)}) in "
                    f"{getattr(func, '__qualname__', _name(func))} before wait() on {work.what} "
                    f"(issued at {work.site or 'an unknown line'}), of which it is an "
                    f"{role} ({describe(hit)}). On NCCL the "
                    + ("result is not there until wait(): this reads whatever the buffer holds (here: poison)"
                       if role == "output" else "input may still be read by the transfer: changing it now "
                       "corrupts what the peers get")
                    + ". Call wait() on the work first (or drop async_op=True)")

    def _violation(self, message: str) -> PendingTensorAccess:
        self.violation = self.violation or message
        return PendingTensorAccess(message)


def _top_mode() -> Any:
    from torch._C import _get_function_stack_at, _len_torch_function_stack

    depth = _len_torch_function_stack()
    return _get_function_stack_at(depth - 1) if depth else None
