"""The session's worlds: one per (backend, world size), started on first use, rebuilt after a failure."""

from __future__ import annotations

import itertools
import os
import shutil
import sys
from collections.abc import Callable

from pytest_dmlbench.errors import WorldError
from pytest_dmlbench.world.forked.scratch import new_scratch_folder, remove_abandoned_scratch_folders
from pytest_dmlbench.world.forked.world import World
from pytest_dmlbench.world.forked.zygote import ZygoteHandle
from pytest_dmlbench.world.messages import WorldSpec
from pytest_dmlbench.world.registry import CaseRegistry


def cuda_initialised() -> bool:
    """Whether this process has initialised CUDA (checked without importing torch)."""
    torch = sys.modules.get("torch")
    return bool(torch is not None and torch.cuda.is_initialized())


class WorldPool:
    """Owns the zygote, the worlds and their scratch folder; ``close`` leaves no process behind."""

    def __init__(self, registry_factory: Callable[[], CaseRegistry], threads_for: Callable[[int], int],
                 init_timeout_s: float = 60.0, pin_cores: bool = False) -> None:
        self._registry_factory = registry_factory
        self._pin_cores = pin_cores
        self._threads_for = threads_for
        self._init_timeout_s = init_timeout_s
        self._zygote: ZygoteHandle | None = None
        self._worlds: dict[tuple[str, int], World] = {}
        # keep only the world in use: a block server (the paired gate runs two beside the session) would
        # otherwise keep a world of every size it served alive, ~0.5 GB a rank, for the whole run
        self.one_world_at_a_time = False
        self._ids = itertools.count(1)
        remove_abandoned_scratch_folders()
        self.root = new_scratch_folder()
        self.cuda_initialised_before_fork = False

    def start_zygote(self) -> None:
        """Fork the zygote now (call it once collection is complete, before tests touch torch)."""
        if self._zygote is None:
            self.cuda_initialised_before_fork = cuda_initialised()
            self._zygote = ZygoteHandle.start(self._registry_factory(), os.path.join(self.root, "zygote.log"))

    def cuda_devices(self) -> int:
        """CUDA devices the ranks would see (asks the zygote; the parent never needs to load torch)."""
        self.start_zygote()
        assert self._zygote is not None
        return self._zygote.cuda_devices()

    def world(self, backend: str, world_size: int) -> World:
        """A healthy world of this shape, starting (or restarting) it when needed."""
        key = (backend, world_size)
        if self.one_world_at_a_time:
            for other in [k for k in self._worlds if k != key]:
                self._worlds.pop(other).stop()
        current = self._worlds.get(key)
        if current is not None and not current.broken:
            return current
        fresh = self._new_world(backend, world_size)
        self._worlds[key] = fresh
        fresh.start()
        return fresh

    def stop_kept_worlds(self) -> None:
        """Stop every world kept for reuse: the next case that asks for one gets a newly started world."""
        for world in self._worlds.values():
            world.stop()
        self._worlds.clear()

    def fresh_world(self, backend: str, world_size: int) -> World:
        """A new world of this shape for one case (``isolation="fresh"``); the caller stops it after."""
        world = self._new_world(backend, world_size)
        world.start()
        return world

    def _new_world(self, backend: str, world_size: int) -> World:
        self.start_zygote()
        assert self._zygote is not None
        if backend == "nccl" and self.cuda_initialised_before_fork:
            raise WorldError(
                "CUDA was initialised in the pytest process before the rank processes were forked "
                "(for example a test module that allocates on the GPU at import time); forked ranks cannot "
                "use CUDA then. Move GPU work into fixtures or case bodies."
            )
        world_id = next(self._ids)
        out_dir = os.path.join(self.root, f"world{world_id}-{backend}-ws{world_size}")
        os.makedirs(out_dir)
        spec = WorldSpec(
            world_id=world_id,
            world_size=world_size,
            backend=backend,
            store_path=os.path.join(out_dir, "store"),
            out_dir=out_dir,
            threads=self._threads_for(world_size),
            init_timeout_s=self._init_timeout_s,
            pin_cores=self._pin_cores,
        )
        return World(spec, self._zygote)

    def close(self) -> None:
        """Stop every world and the zygote, then remove the scratch folder."""
        self.stop_kept_worlds()
        if self._zygote is not None:
            self._zygote.close()
            self._zygote = None
        shutil.rmtree(self.root, ignore_errors=True)
