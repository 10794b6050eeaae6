"""``init_process_group`` and ``destroy_process_group`` inside a case: code written for torchrun runs as it is.

Runs on ranks only (no pytest import). :func:`install` replaces both functions, once per process, in
``torch.distributed``, ``torch.distributed.distributed_c10d`` and every loaded module that imported them by
name (``from torch.distributed import init_process_group`` in a script imported at collection, before the
ranks existed), each through ``measure/torch_patches.py``; they stay for the life of the process. Outside a
case (:func:`adopting`) the replacements call torch's own functions, so a world joins and leaves its group as
before. Inside a case:

- ``init_process_group`` adopts the world's group when the call asks for what the world already is: the
  world's backend or none, ``init_method`` ``None``, ``env://`` or ``tcp://MASTER_ADDR:MASTER_PORT``, the
  world's size and this rank (or -1), no store or a ``TCPStore`` at the master address, this rank's device or
  no ``device_id``. ``timeout`` and ``group_name`` are accepted and not applied (the world keeps its own).
  Anything else raises :class:`GroupMismatch` naming each difference and the fix.
- ``destroy_process_group()`` (or of the default group) ends the case's use of the group: the sub-groups the
  case created are destroyed, as torch's call would, and the world's group stays for the next case; a later
  ``init_process_group`` adopts it again. ``is_initialized()`` still answers True afterwards, and the group
  still works if the case goes on using it. Destroying a sub-group is torch's own call.

On simulated ranks (threads of one process) each rank adopts for itself (``adopting(..., per_thread=True)``),
and a call may name gloo, which simulated ranks stand in for.

The per-case guard still checks what is left: a case that reaches torch's own destroy another way is
reported by :class:`~pytest_dmlbench.world.groups.GroupWatch` and its world rebuilt.
"""

from __future__ import annotations

import functools
import inspect
import os
import sys
import threading
import types
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from pytest_dmlbench.errors import GroupMismatch
from pytest_dmlbench.measure import torch_patches
from pytest_dmlbench.measure.dist_info import DistInfo

_NAMES = ("init_process_group", "destroy_process_group")
_MARK = "__dmlbench_adopting__"
_INSTALLER = f"{__name__}.install"
_originals: dict[str, Callable[..., Any]] = {}  # torch's own functions
_wrappers: dict[str, Callable[..., Any]] = {}  # the adopting ones that replace them
_case: _Case | None = None  # the world the running case adopts (None outside a case)
_thread_case = threading.local()  # simulated ranks (threads of one process): each thread's own, over _case
_FIX_SUFFIX = ("the world's process group already exists, so it can only be adopted as it is; "
               "in a case, call init_process_group() with no arguments, or with the world's own values")


@dataclass
class _Case:
    """The world a running case adopts: its group's backend, size and this rank, the master address."""

    rank: int
    world_size: int
    backend: str
    device: str
    master: tuple[str, int] | None
    groups_before: set[int] = field(default_factory=set)
    stands_in_for: tuple[str, ...] = ()  # backends a call may name for this one (simulated ranks: gloo)

    def mismatches(self, arguments: dict[str, Any]) -> list[str]:
        """What the call asks for that this world cannot give, one sentence (with its fix) each."""
        problems: list[str] = []
        for name, value in arguments.items():
            check = getattr(self, f"_check_{name}", None)
            if check is not None:
                problem = check(value)
            elif _is_default(value, _init_defaults().get(name, inspect.Parameter.empty)):
                problem = None
            else:
                problem = (f"{name}={value!r} cannot be applied to the world's existing group; "
                           f"drop {name}= inside the case")
            if problem:
                problems.append(problem)
        return problems

    def _check_backend(self, value: Any) -> str | None:
        if value is None or str(value).lower() in (self.backend, *self.stands_in_for):
            return None
        return (f"backend={str(value)!r}, but this case's world runs {self.backend!r}; ask for "
                f"{self.backend!r} (or no backend), or run the case on a {str(value).lower()} world: "
                f"@pytest.mark.dmlbench(backend={str(value).lower()!r})")

    def _check_init_method(self, value: Any) -> str | None:
        if value is None or str(value).startswith("env://"):
            return None
        if self.master is not None and str(value) == f"tcp://{self.master[0]}:{self.master[1]}":
            return None
        where = f"env:// or tcp://{self.master[0]}:{self.master[1]}" if self.master else "env://"
        return (f"init_method={value!r} is a rendezvous this world does not use; use {where} "
                f"(the MASTER_ADDR and MASTER_PORT the case sees), or no init_method")

    def _check_world_size(self, value: Any) -> str | None:
        if value in (-1, None) or int(value) == self.world_size:
            return None
        return (f"world_size={value}, but this case runs on {self.world_size} rank(s); read WORLD_SIZE instead "
                f"of fixing it, or run the case at world size {value}: @pytest.mark.dmlbench(world_size={value})")

    def _check_rank(self, value: Any) -> str | None:
        if value in (-1, None) or int(value) == self.rank:
            return None
        return f"rank={value}, but this process is rank {self.rank}; read RANK instead of fixing it"

    def _check_store(self, value: Any) -> str | None:
        if value is None:
            return None
        address = (getattr(value, "host", None), getattr(value, "port", None))
        if self.master is not None and address == self.master:
            return None
        return (f"store={type(value).__name__} at {address[0]}:{address[1]}, a store this world does not use; "
                "drop store= (the world's group is adopted), or connect to MASTER_ADDR:MASTER_PORT")

    def _check_device_id(self, value: Any) -> str | None:
        if value is None:
            return None
        import torch

        wanted = torch.device("cuda", value) if isinstance(value, int) else torch.device(value)
        if wanted == torch.device(self.device):
            return None
        return f"device_id={wanted}, but this rank's device is {self.device}; use LOCAL_RANK's device or none"

    def _check_timeout(self, value: Any) -> None:
        return None  # the world's own timeout (--dmlbench-timeout) stays

    def _check_group_name(self, value: Any) -> None:
        return None


@functools.cache
def _init_defaults() -> dict[str, Any]:
    """The default of each parameter of torch's ``init_process_group``."""
    import torch.distributed.distributed_c10d as c10d

    function = getattr(c10d.init_process_group, _MARK, c10d.init_process_group)
    return {name: p.default for name, p in inspect.signature(function).parameters.items()}


def _is_default(value: Any, default: Any) -> bool:
    return value is default or (value == default if isinstance(default, (bool, int, str)) else False)


def _group_map() -> list[Any]:
    import torch.distributed.distributed_c10d as c10d

    return list(c10d._world.pg_map)


def _call_shape(arguments: dict[str, Any]) -> str:
    given = ", ".join(f"{name}={value!r}" for name, value in arguments.items()
                      if not _is_default(value, _init_defaults().get(name, inspect.Parameter.empty)))
    return f"init_process_group({given})"


def _adopting_init(original: Callable[..., Any]) -> Callable[..., Any]:
    signature = inspect.signature(original)

    @functools.wraps(original)
    def init_process_group(*args: Any, **kwargs: Any) -> None:
        case = _current()
        if case is None:
            original(*args, **kwargs)
            return None
        arguments = dict(signature.bind(*args, **kwargs).arguments)
        problems = case.mismatches(arguments)
        if problems:
            raise GroupMismatch(
                f"{_call_shape(arguments)} on rank {case.rank} asks for what this case's world "
                f"({case.world_size} rank(s), {case.backend}) cannot give:\n  - " + "\n  - ".join(problems)
                + f"\n({_FIX_SUFFIX})")
        return None

    setattr(init_process_group, _MARK, original)
    return init_process_group


def _adopting_destroy(original: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(original)
    def destroy_process_group(group: Any = None) -> None:
        import torch.distributed as td

        case = _current()
        if case is None or not td.is_initialized() or not _is_world(group):
            original(group)
            return None
        default = td.distributed_c10d._get_default_group()
        for created in _group_map():
            if id(created) not in case.groups_before and created is not default:
                original(created)
        return None

    setattr(destroy_process_group, _MARK, original)
    return destroy_process_group


def _current() -> _Case | None:
    """The case the calling thread adopts for: its own (simulated ranks), else the process's."""
    mine: _Case | None = getattr(_thread_case, "case", None)
    return mine if mine is not None else _case


def _is_world(group: Any) -> bool:
    import torch.distributed.distributed_c10d as c10d

    return group is None or group is c10d.GroupMember.WORLD or group is c10d._get_default_group()


def install() -> None:
    """Put the adopting functions in ``torch.distributed`` and its ``distributed_c10d`` (cheap when they are
    there already); the first call also rebinds the names in every loaded module."""
    import torch.distributed as td
    import torch.distributed.distributed_c10d as c10d

    first = not _originals
    for name in _NAMES:
        current = getattr(c10d, name)
        original = getattr(current, _MARK, current)
        if name not in _originals:
            _originals[name] = original
            wrapper = (_adopting_init if name == "init_process_group" else _adopting_destroy)(original)
            _wrappers[name] = wrapper
        for module in (td, c10d):
            if vars(module).get(name) is not _wrappers[name]:
                torch_patches.install(module, name, _wrappers[name], by=_INSTALLER)
    if first:
        _rebind_loaded_modules()


def _rebind_loaded_modules() -> None:
    """Modules that imported torch's functions by name get the adopting ones (identity match only)."""
    for module in list(sys.modules.values()):
        if not isinstance(module, types.ModuleType):
            continue
        for key, value in list(vars(module).items()):
            for name in _NAMES:
                if value is _originals[name]:
                    torch_patches.install(module, key, _wrappers[name], by=_INSTALLER)


@contextmanager
def adopting(dist: DistInfo, *, per_thread: bool = False, stands_in_for: tuple[str, ...] = ()) -> Iterator[None]:
    """Inside the block, ``init_process_group`` adopts this rank's world and its destroy keeps it.

    ``per_thread``: only for the calling thread (a simulated rank; every other thread keeps the process's).
    ``stands_in_for``: backends a call may ask for that this world's backend plays (simulated ranks: gloo)."""
    global _case
    import torch.distributed as td

    case = None
    if td.is_initialized():
        port = os.environ.get("MASTER_PORT", "")
        master = (os.environ["MASTER_ADDR"], int(port)) if "MASTER_ADDR" in os.environ and port.isdigit() else None
        case = _Case(td.get_rank(), td.get_world_size(), str(td.get_backend()).lower(), dist.device, master,
                     {id(group) for group in _group_map()}, stands_in_for)
    if per_thread:
        previous_mine = getattr(_thread_case, "case", None)
        _thread_case.case = case
        try:
            yield
        finally:
            _thread_case.case = previous_mine
        return
    previous = _case
    _case = case if case is not None else previous
    try:
        yield
    finally:
        _case = previous
