"""torch's process-group bookkeeping (``distributed_c10d._world``) made per thread.

``torch.distributed`` keeps the default group, the group names and the rank maps in one module-level
``_World``; torch documents replacing it as an experimental extension point. :class:`ThreadWorld` keeps one
``_World``'s worth of state per thread, so each simulated rank sees only its own groups; threads that are
not ranks keep seeing the state that was there before. :func:`per_thread_world` installs it through
``measure/torch_patches.py``.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from torch.distributed import distributed_c10d as c10d

from pytest_dmlbench.measure import torch_patches

_STATE_FIELDS = ("pg_map", "pg_names", "pg_group_ranks", "pg_backend_config", "tags_to_pg", "pg_to_tag")


class _RankState:
    """One thread's copy of the fields ``_World`` keeps."""

    def __init__(self) -> None:
        self.default_pg: Any = None
        self.group_count = 0
        self.pg_coalesce_state: dict[Any, Any] = {}
        self.comms: list[Any] = []
        for name in _STATE_FIELDS:
            setattr(self, name, {})


class ThreadWorld(c10d._World):
    """A ``_World`` whose state belongs to the calling thread once :meth:`bind` was called there."""

    def __init__(self, fallback: c10d._World) -> None:
        super().__init__()
        self._fallback = fallback
        self._local = threading.local()

    def bind(self) -> None:
        """Give the calling thread a state of its own (empty: no group yet)."""
        self._local.state = _RankState()

    def _state(self) -> _RankState | None:
        return getattr(self._local, "state", None)

    def _get(self, name: str) -> Any:
        state = self._state()
        return getattr(self._fallback, name) if state is None else getattr(state, name)

    @property
    def default_pg(self) -> Any:
        return self._get("default_pg")

    @default_pg.setter
    def default_pg(self, value: Any) -> None:
        state = self._state()
        if state is None:
            self._fallback.default_pg = value
        else:
            state.default_pg = value

    @property
    def group_count(self) -> int:
        return int(self._get("group_count"))

    @group_count.setter
    def group_count(self, value: int) -> None:
        state = self._state()
        if state is None:
            self._fallback.group_count = value
        else:
            state.group_count = value

    @property
    def pg_map(self) -> Any:
        return self._get("pg_map")

    @property
    def pg_names(self) -> Any:
        return self._get("pg_names")

    @property
    def pg_group_ranks(self) -> Any:
        return self._get("pg_group_ranks")

    @property
    def pg_backend_config(self) -> Any:
        return self._get("pg_backend_config")

    @property
    def tags_to_pg(self) -> Any:
        return self._get("tags_to_pg")

    @property
    def pg_to_tag(self) -> Any:
        return self._get("pg_to_tag")

    @property
    def pg_coalesce_state(self) -> Any:
        return self._get("pg_coalesce_state")

    @property
    def comms(self) -> Any:
        return self._get("comms")


@contextmanager
def per_thread_world() -> Iterator[ThreadWorld]:
    """Install a :class:`ThreadWorld` (and torch's per-thread group-name registry) for the block."""
    from torch._C import _distributed_c10d

    c_c10d: Any = _distributed_c10d  # _set_thread_isolation_mode: private, checked in compat
    world = ThreadWorld(c10d._world)
    patch = torch_patches.install(c10d, "_world", world, by=f"{__name__}.per_thread_world")
    c_c10d._set_thread_isolation_mode(True)
    try:
        yield world
    finally:
        c_c10d._set_thread_isolation_mode(False)
        torch_patches.restore(patch)
