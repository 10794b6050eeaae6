"""Forked worlds: the default engine. A zygote forked after collection forks rank processes per world.

Parent side only: owns the world pool, turns a prepared case into the message the ranks run, and sends
the case's fixture values (pickled) along.
"""

from __future__ import annotations

from collections.abc import Sequence

from pytest_dmlbench.errors import CaseNotRunnable, WorldError
from pytest_dmlbench.world.backend import BackendChoice, select_backend
from pytest_dmlbench.world.case_arguments import split_arguments
from pytest_dmlbench.world.engine import CollectedCase, PreparedCase
from pytest_dmlbench.world.execute import case_seed
from pytest_dmlbench.world.forked.pool import WorldPool
from pytest_dmlbench.world.outcome import CaseOutcome
from pytest_dmlbench.world.registry import CaseEntry, CaseRegistry
from pytest_dmlbench.world.run_facts import RunFacts


class ForkedEngine:
    """Everything the plugin keeps for one pytest process (one per xdist worker) in forked mode."""

    reports = True

    def __init__(self, facts: RunFacts, pin_cores: bool = False) -> None:
        self.registry: CaseRegistry = {}
        self.pool: WorldPool = WorldPool(lambda: self.registry, facts.threads_per_rank, pin_cores=pin_cores)

    def prepare(self, cases: Sequence[CollectedCase]) -> None:
        """Register the cases and fork the zygote while the process is still free of torch and CUDA."""
        for case in cases:
            self.registry[case.nodeid] = CaseEntry(case.func, case.argnames, dict(case.params))
        if cases:
            self.pool.start_zygote()

    def choose_backend(self, requested: str, world_size: int) -> BackendChoice:
        devices = self.pool.cuda_devices() if requested != "gloo" else 0
        return select_backend(requested, world_size, devices)

    def run(self, case: PreparedCase) -> CaseOutcome:
        nodeid = case.case.nodeid
        if nodeid not in self.registry:
            raise CaseNotRunnable(f"{nodeid} was not collected before the rank processes started; "
                                  "distributed cases must be collected up front")
        registry_args, pickled = split_arguments(case.case.argnames, case.funcargs, case.case.params)
        fresh = case.isolation == "fresh"
        try:
            if fresh:
                world = self.pool.fresh_world(case.backend, case.world_size)
            else:
                world = self.pool.world(case.backend, case.world_size)
        except WorldError as exc:
            raise CaseNotRunnable(f"the rank world could not be started: {exc}") from exc
        try:
            return world.run(nodeid, seed=case_seed(nodeid), registry_args=registry_args, pickled_args=pickled,
                             measure_memory=case.uses_bench, timeout_s=case.timeout_s, block=case.block)
        finally:
            if fresh:
                world.kill()  # its ranks are done with; SIGKILL skips hundreds of ms of orderly teardown

    def close(self) -> None:
        self.pool.close()
