"""The one registry of what the plugin replaces in ``torch.distributed`` (and on its ``ProcessGroup`` class).

Runs on ranks (no pytest import). Every module that patches torch installs and restores through here:
``measure/comm.py`` (the counting collectives), ``world/adopt_group.py`` (``init_process_group`` and
``destroy_process_group`` inside a case), ``world/groups.py`` (point-to-point accounting on ``ProcessGroup``),
``world/bound_store.py`` (the rendezvous store factory) and ``world/simulated/thread_world.py`` (the per-thread
group registry). It sits on the measurement floor, the lowest of them, so every one can import it.

:func:`install` sets ``owner.name`` and records a :class:`Patch`: the owner, the name, the value the owner held
itself before (``ABSENT`` when it had none of its own), the value put there and who put it. :func:`installed`
lists what is in place, oldest first; :func:`restore` takes one off and :func:`restore_all` several, newest
first. A restore that would not undo its own install changes nothing and raises
:class:`~pytest_dmlbench.errors.PatchConflict` naming both parties: the attribute no longer holds the patched
value (something replaced it since), or a later patch of the same attribute is still on. Restoring a patch
that is no longer installed does nothing: the state guard (``world/guard.py``) takes off, and reports, a patch
a case left on, and its installer may come to it afterwards.

Values are read from the owner's own ``__dict__`` and written with ``setattr``/``delattr``, so a class gets
back the very descriptor it had (a pybind method, not the function it hands out) and an inherited attribute
is deleted again rather than copied onto the subclass.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from pytest_dmlbench.errors import PatchConflict


class _Absent:
    """The owner had no attribute of that name of its own (a restore deletes it)."""

    def __repr__(self) -> str:
        return "ABSENT"


ABSENT: Any = _Absent()
_lock = threading.RLock()  # simulated ranks are threads of one process
_installed: list[Patch] = []


@dataclass(frozen=True, eq=False)  # identity: two installs of the same value are two patches
class Patch:
    """One installed replacement of ``owner.name``."""

    owner: Any
    name: str
    original: Any
    patched: Any
    installer: str

    @property
    def where(self) -> str:
        """``torch.distributed.all_reduce``, ``torch._C._distributed_c10d.ProcessGroup.send``, ..."""
        return f"{_owner_name(self.owner)}.{self.name}"

    def current(self) -> Any:
        """What the owner itself holds under the name now (``ABSENT`` when nothing)."""
        return _own(self.owner, self.name)

    def in_place(self) -> bool:
        """Whether the owner still holds the patched value."""
        return self.current() is self.patched


def install(owner: Any, name: str, patched: Any, *, by: str) -> Patch:
    """Set ``owner.name`` to ``patched`` and record it; ``by`` names the installer (module and function)."""
    with _lock:
        patch = Patch(owner, name, _own(owner, name), patched, by)
        setattr(owner, name, patched)
        _installed.append(patch)
    return patch


def installed() -> tuple[Patch, ...]:
    """What is installed now, oldest first."""
    with _lock:
        return tuple(_installed)


def restore(patch: Patch) -> None:
    """Put back what ``patch`` replaced; raises :class:`PatchConflict` (and changes nothing) when that would
    not undo its own install."""
    with _lock:
        if patch not in _installed:
            return
        problem = _conflict(patch)
        if problem:
            raise PatchConflict(problem)
        _put_back(patch)


def restore_all(patches: Iterable[Patch]) -> None:
    """Restore ``patches`` newest first; raises one :class:`PatchConflict` naming every one that could not be
    restored, after restoring the rest."""
    with _lock:
        order = {id(patch): index for index, patch in enumerate(_installed)}
        problems = []
        for patch in sorted((p for p in patches if id(p) in order), key=lambda p: order[id(p)], reverse=True):
            problem = _conflict(patch)
            if problem:
                problems.append(problem)
            else:
                _put_back(patch)
        if problems:
            raise PatchConflict("\n".join(problems))


def take_off(patch: Patch) -> None:
    """Put back what ``patch`` replaced whatever holds the attribute now, and forget it (the state guard's
    last resort for a patch a case left on and something else replaced since)."""
    with _lock:
        if patch in _installed:
            _put_back(patch)


def describe(value: Any) -> str:
    """A value as a person reads it: a function or class by its qualified name, anything else by repr."""
    if value is ABSENT:
        return "nothing (the attribute was deleted)"
    qualname = getattr(value, "__qualname__", None)
    if isinstance(qualname, str):
        return f"{getattr(value, '__module__', None) or '?'}.{qualname}"
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def _conflict(patch: Patch) -> str:
    later = [p for p in _installed[_installed.index(patch) + 1:] if p.owner is patch.owner and p.name == patch.name]
    if later:
        return (f"{patch.where}: cannot restore {patch.installer}'s patch while {later[-1].installer}'s patch of "
                "the same attribute, installed after it, is still on; patches come off newest first (restore "
                "that one first)")
    if not patch.in_place():
        return (f"{patch.where}: cannot restore {patch.installer}'s patch: the attribute was replaced since by "
                f"{describe(patch.current())}, and restoring would drop that; whatever replaced it "
                "must put it back first (or install through pytest_dmlbench.measure.torch_patches)")
    return ""


def _put_back(patch: Patch) -> None:
    if patch.original is ABSENT:
        if patch.name in vars(patch.owner):
            delattr(patch.owner, patch.name)
    else:
        setattr(patch.owner, patch.name, patch.original)
    _installed.remove(patch)


def _own(owner: Any, name: str) -> Any:
    return vars(owner).get(name, ABSENT)


def _owner_name(owner: Any) -> str:
    if isinstance(owner, type):
        return f"{owner.__module__}.{owner.__qualname__}"
    name = getattr(owner, "__name__", None)
    return name if isinstance(name, str) else type(owner).__name__
