"""The parent-side run: the world pool, dispatching items to ranks, and the results gathered so far."""

from __future__ import annotations

import pickle
import zlib
from dataclasses import dataclass, field
from typing import Any

from pytest_dmlbench.config import CaseSettings, DmlbenchConfig
from pytest_dmlbench.world.backend import threads_per_rank
from pytest_dmlbench.world.pool import WorldPool
from pytest_dmlbench.world.registry import CaseEntry, CaseRegistry
from pytest_dmlbench.world.world import CaseRun

RANK_SIDE_FIXTURES = ("dist", "dmlbench")


class UnsendableArgument(Exception):
    """A fixture value that cannot be pickled to the ranks."""


@dataclass
class PreparedCase:
    """What the parent sends for one item."""

    nodeid: str
    settings: CaseSettings
    backend: str
    registry_args: tuple[str, ...]
    pickled_args: bytes
    uses_bench: bool


def case_seed(nodeid: str) -> int:
    """A per-case seed that is the same in every run and process (rank r adds r)."""
    return zlib.crc32(nodeid.encode("utf-8")) & 0x7FFFFFFF


def split_arguments(argnames: tuple[str, ...], funcargs: dict[str, Any],
                    params: dict[str, Any]) -> tuple[tuple[str, ...], bytes]:
    """Direct parametrize values come from the ranks' own copy; other fixture values are pickled."""
    from_registry = []
    values = {}
    for name in argnames:
        if name in RANK_SIDE_FIXTURES:
            continue
        if name in params and funcargs.get(name) is params[name]:
            from_registry.append(name)
        else:
            values[name] = funcargs[name]
    if not values:
        return tuple(from_registry), b""
    try:
        return tuple(from_registry), pickle.dumps(values)
    except Exception as together:  # diagnosed below: which fixture, with its own error chained
        failure = together
    for name, value in values.items():  # only on failure: pickle one by one to name the culprit
        try:
            pickle.dumps(value)
        except Exception as exc:
            raise UnsendableArgument(
                f"fixture {name!r} (a {type(value).__name__}) cannot be sent to the rank processes: {exc}. "
                "Fixtures run in the pytest process and their values are pickled to every rank; return a "
                "picklable value, or build the object inside the case body."
            ) from exc
    raise UnsendableArgument(
        f"the fixture values {sorted(values)} cannot be pickled together for the ranks: {failure}"
    ) from failure


@dataclass
class DmlbenchSession:
    """Everything the plugin keeps for one pytest process (one per xdist worker)."""

    config: DmlbenchConfig
    cores: int
    workers: int
    registry: CaseRegistry = field(default_factory=dict)
    pool: WorldPool | None = None

    def __post_init__(self) -> None:
        self.pool = WorldPool(lambda: self.registry, self._threads_for)

    def _threads_for(self, world_size: int) -> int:
        return threads_per_rank(self.cores, world_size, self.workers)

    def oversubscribed(self, world_size: int) -> bool:
        return world_size * self.workers > self.cores

    def register(self, nodeid: str, entry: CaseEntry) -> None:
        self.registry[nodeid] = entry

    def start(self) -> None:
        """Fork the zygote while the process is still free of torch compute and CUDA."""
        assert self.pool is not None
        self.pool.start_zygote()

    def cuda_devices(self) -> int:
        assert self.pool is not None
        return self.pool.cuda_devices()

    def run(self, case: PreparedCase) -> CaseRun:
        """Run the case on the kept world of its shape, or on a world of its own (``isolation="fresh"``)."""
        assert self.pool is not None
        fresh = case.settings.isolation == "fresh"
        if fresh:
            world = self.pool.fresh_world(case.backend, case.settings.world_size)
        else:
            world = self.pool.world(case.backend, case.settings.world_size)
        try:
            return world.run(
                case.nodeid,
                seed=case_seed(case.nodeid),
                registry_args=case.registry_args,
                pickled_args=case.pickled_args,
                measure_memory=case.uses_bench,
                options={},
                timeout_s=case.settings.timeout_s,
            )
        finally:
            if fresh:
                world.kill()  # its ranks are done with; SIGKILL skips hundreds of ms of orderly teardown

    def close(self) -> None:
        if self.pool is not None:
            self.pool.close()
            self.pool = None
