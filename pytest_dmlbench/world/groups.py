"""The process groups across one case: collectives issued on the default group, sub-groups the case
created, and whether the default group survived.

Runs on ranks only (no pytest import). The default group keeps a sequence number that every operation on it
advances, point-to-point ones included; a pipeline's first stage only sends and its last only receives, so
ranks legitimately differ in those. :func:`install_p2p_accounting` therefore wraps
``ProcessGroup.send``/``recv``/``recv_anysource`` (the class methods every Python-level point-to-point call
ends in) and counts how far each advanced the default group's number; collectives issued by a case are the
advance of the number minus that. It installs through ``measure/torch_patches.py``;
:func:`uninstall_p2p_accounting` puts torch's own methods back. Limits: point-to-point operations coalesced by
NCCL advance the number when the batch ends, outside these methods, and an asynchronous collective issued by
another thread while a point-to-point call runs is counted as point-to-point.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from pytest_dmlbench.measure import torch_patches

_P2P_METHODS = ("send", "recv", "recv_anysource")
_WRAPPED_ATTR = "__dmlbench_p2p__"
_INSTALLER = f"{__name__}.install_p2p_accounting"
_p2p_patches: list[torch_patches.Patch] = []


class _Depth(threading.local):
    value: int = 0


_depth = _Depth()
_p2p_lock = threading.Lock()
_p2p_advance = 0


def default_sequence() -> int | None:
    """The default group's sequence number, or None without a group (or a backend that keeps none)."""
    import torch.distributed as td

    if not td.is_initialized():
        return None
    try:
        group: Any = td.distributed_c10d._get_default_group()
        return int(group._get_sequence_number_for_group())
    except (RuntimeError, AttributeError, NotImplementedError):
        return None


def p2p_advance() -> int:
    """How far point-to-point calls have advanced the default group's sequence number in this process."""
    with _p2p_lock:
        return _p2p_advance


def _counting(method: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(method)
    def wrapper(self: Any, *args: Any, **kwargs: Any) -> Any:
        global _p2p_advance
        if _depth.value:
            return method(self, *args, **kwargs)
        before = default_sequence()
        _depth.value += 1
        try:
            return method(self, *args, **kwargs)
        finally:
            _depth.value -= 1
            after = default_sequence()
            if before is not None and after is not None:
                with _p2p_lock:
                    _p2p_advance += after - before

    setattr(wrapper, _WRAPPED_ATTR, method)
    return wrapper


def install_p2p_accounting() -> None:
    """Wrap the point-to-point methods of ``ProcessGroup`` (once per process)."""
    from torch._C._distributed_c10d import ProcessGroup

    for name in _P2P_METHODS:
        method = getattr(ProcessGroup, name, None)
        if method is not None and not hasattr(method, _WRAPPED_ATTR):
            _p2p_patches.append(torch_patches.install(ProcessGroup, name, _counting(method), by=_INSTALLER))


def uninstall_p2p_accounting() -> None:
    """Put ``ProcessGroup``'s own point-to-point methods back (what :func:`install_p2p_accounting` wrapped)."""
    patches = list(_p2p_patches)
    _p2p_patches.clear()
    torch_patches.restore_all(patches)


@dataclass(frozen=True)
class GroupReport:
    """The default group after a case: collectives the case issued on it (None when unknown), whether any
    operation advanced its sequence number (True when unknown) and, when the group was destroyed or
    replaced, why the world has to be rebuilt."""

    collectives: int | None
    rebuild: str = ""
    touched: bool = True


@dataclass
class GroupWatch:
    """The groups as they were before a case."""

    default: Any
    sequence: int | None
    p2p: int
    existing: set[int]

    @classmethod
    def start(cls) -> GroupWatch:
        import torch.distributed as td

        default = td.distributed_c10d._get_default_group() if td.is_initialized() else None
        return cls(default, default_sequence(), p2p_advance(), {id(pg) for pg in _groups()})

    def finish(self) -> GroupReport:
        """Destroy the sub-groups the case created and report on the default group."""
        import torch.distributed as td

        if not td.is_initialized():
            return GroupReport(None, "the case destroyed the default process group")
        default = td.distributed_c10d._get_default_group()
        created = [group for group in _groups() if id(group) not in self.existing and group is not default]
        for group in created:
            td.destroy_process_group(group)
        if default is not self.default:
            return GroupReport(None, "the case replaced the default process group")
        after = default_sequence()
        if after is None or self.sequence is None:
            return GroupReport(None)
        return GroupReport(after - self.sequence - (p2p_advance() - self.p2p),
                           touched=after != self.sequence or bool(created))


def _groups() -> list[Any]:
    import torch.distributed.distributed_c10d as c10d

    return list(c10d._world.pg_map)
