"""Ray worlds (``--dmlbench-launcher ray``): every rank of a world is a Ray actor, with the forked
engine's contract (a raise, a hang and a dead rank fail that item with the rank named, the world is
rebuilt; no actor outlives the session).

Ray runs embedded (a local instance started on first use) unless ``RAY_ADDRESS`` names a cluster. Ranks
speak gloo; a case asking for nccl is skipped with the reason, since the actors' GPUs are Ray's to place.
"""

from __future__ import annotations

import itertools
import sys
from collections.abc import Sequence

from pytest_dmlbench.errors import CaseNotRunnable, WorldError
from pytest_dmlbench.world.backend import BackendChoice
from pytest_dmlbench.world.case_arguments import split_arguments
from pytest_dmlbench.world.engine import CollectedCase, PreparedCase
from pytest_dmlbench.world.execute import case_seed
from pytest_dmlbench.world.messages import WorldSpec
from pytest_dmlbench.world.outcome import CaseOutcome
from pytest_dmlbench.world.ray.world import RayWorld
from pytest_dmlbench.world.registry import CaseEntry, CaseRegistry
from pytest_dmlbench.world.run_facts import RunFacts

INIT_TIMEOUT_S = 120.0  # placing actors and starting Ray's workers takes seconds to tens of seconds


class RayEngine:
    """The session's Ray worlds, one per world size, started on first use and rebuilt after a failure."""

    reports = True

    def __init__(self, facts: RunFacts, *, spread: bool = False) -> None:
        self.facts = facts
        self.spread = spread
        self.registry: CaseRegistry = {}
        self._worlds: dict[int, RayWorld] = {}
        self._ids = itertools.count(1)
        self._started_ray = False

    def prepare(self, cases: Sequence[CollectedCase]) -> None:
        for case in cases:
            self.registry[case.nodeid] = CaseEntry(case.func, case.argnames, dict(case.params))

    def choose_backend(self, requested: str, world_size: int) -> BackendChoice:
        if requested == "nccl":
            return BackendChoice("nccl", "the Ray launcher runs gloo worlds; use --dmlbench-launcher fork for nccl")
        return BackendChoice("gloo")

    def _new_world(self, world_size: int) -> RayWorld:
        ray_was_up = "ray" in sys.modules and sys.modules["ray"].is_initialized()
        spec = WorldSpec(world_id=next(self._ids), world_size=world_size, backend="gloo", store_path="",
                         out_dir="", threads=self.facts.threads_per_rank(world_size), init_timeout_s=INIT_TIMEOUT_S)
        world = RayWorld(spec, self.registry, spread=self.spread)
        self._make_room(world_size * world.cpus_per_rank)
        try:
            world.start()
        finally:
            self._started_ray = self._started_ray or (not ray_was_up and "ray" in sys.modules)
        return world

    def _make_room(self, cpus: float) -> None:
        """Free the cluster for a world that needs ``cpus`` CPUs: stop the kept worlds when too few CPUs are
        free, and shut down an embedded Ray too small for it (it was started for the first world's size; the
        next world starts a large enough one), so one run mixes world sizes on Ray as on the other launchers."""
        ray = sys.modules.get("ray")
        if ray is None or not ray.is_initialized() or ray.available_resources().get("CPU", 0.0) >= cpus:
            return
        for world in self._worlds.values():
            world.stop()
        self._worlds.clear()
        if self._started_ray and ray.cluster_resources().get("CPU", 0.0) < cpus:
            ray.shutdown()

    def _world(self, world_size: int) -> RayWorld:
        current = self._worlds.get(world_size)
        if current is None or current.broken:
            current = self._worlds[world_size] = self._new_world(world_size)
        return current

    def run(self, case: PreparedCase) -> CaseOutcome:
        nodeid = case.case.nodeid
        if nodeid not in self.registry:
            raise CaseNotRunnable(f"{nodeid} was not collected before the Ray worlds started; "
                                  "distributed cases must be collected up front")
        registry_args, pickled = split_arguments(case.case.argnames, case.funcargs, case.case.params)
        fresh = case.isolation == "fresh"
        try:
            world = self._new_world(case.world_size) if fresh else self._world(case.world_size)
        except WorldError as exc:
            raise CaseNotRunnable(f"the Ray world could not be started: {exc}") from exc
        try:
            return world.run(nodeid, seed=case_seed(nodeid), registry_args=registry_args, pickled_args=pickled,
                             measure_memory=case.uses_bench, timeout_s=case.timeout_s, block=case.block)
        finally:
            if fresh:
                world.kill()

    def close(self) -> None:
        """Stop every world (its actors and placement group), then Ray itself when this engine started it."""
        for world in self._worlds.values():
            world.stop()
        self._worlds.clear()
        ray = sys.modules.get("ray")
        if self._started_ray and ray is not None and ray.is_initialized():
            ray.shutdown()
