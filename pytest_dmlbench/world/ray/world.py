"""A world whose ranks are Ray actors: the same surface and failure contract as :class:`World`.

``RayWorld(spec, registry)`` then ``start()``, ``run(...) -> CaseOutcome``, ``kill()``, ``stop()``, like the
forked engine's :class:`~pytest_dmlbench.world.forked.world.World`:

- Ray: ``ray.init()`` when Ray is not initialised yet (the cluster at ``RAY_ADDRESS``, else a local instance
  that listens on 127.0.0.1 only, :mod:`.local`), with the parent's ``sys.path`` as the workers'
  ``PYTHONPATH`` so that test modules import there (a local cluster or a shared file system).
- Placement: one bundle of ``cpus_per_rank`` CPUs per rank in a placement group, ``PACK`` by default;
  with ``spread=True`` one rank per node (``STRICT_SPREAD``) when the cluster has a node for every rank, else
  ``SPREAD`` (Ray's best effort, several ranks per node). Each rank is a :class:`~.rank.RankActor` in
  its bundle.
- Rendezvous: rank 0's actor starts a ``torch.distributed.TCPStore`` listening on one address only, port
  chosen by the OS (:attr:`RayWorld.store_address`): loopback with ``GLOO_SOCKET_IFNAME=lo`` when every rank
  is on one node, else rank 0's node address. The others join through it.
- Cases: the registry (case functions and their parametrize values) travels to every actor with Ray's
  pickling; a case is a :class:`~pytest_dmlbench.world.messages.CaseRequest` sent to every actor.
- Failures: a case that raises on some ranks fails with each rank's traceback; the others get
  ``FAILURE_GRACE_S`` to report, then count as stuck. A hung case is stopped at its timeout with every
  stuck rank's stacks (asked from the actor's second thread). A dead actor is named with Ray's reason. After
  any of these the world is broken: its actors are killed and the caller builds a new one.
- Lifetime: actors are not detached, so none outlives the driver; ``kill``/``stop`` also remove the
  placement group.
"""

from __future__ import annotations

import os
import sys
import time
from typing import Any

from pytest_dmlbench.errors import WorldError
from pytest_dmlbench.world.dispatch import CaseDispatch, RankLost
from pytest_dmlbench.world.messages import CaseRequest, RankOutcome, Ready, WorldSpec
from pytest_dmlbench.world.outcome import RankReport
from pytest_dmlbench.world.ray.local import start_local
from pytest_dmlbench.world.registry import CaseRegistry

INSTALL_HINT = "pip install 'pytest-dmlbench[ray]' (or pip install ray)"
STACK_WAIT_S = 20.0  # an answer normally takes milliseconds; a loaded machine may take seconds
STOP_WAIT_S = 2.0


def import_ray() -> Any:
    """``ray``, or a :class:`WorldError` saying how to install it."""
    try:
        import ray
    except ModuleNotFoundError as exc:
        if exc.name != "ray":
            raise
        raise WorldError(f"the Ray launcher needs Ray, which is not installed: {INSTALL_HINT}") from exc
    return ray


def ensure_ray(num_cpus: float | None = None) -> Any:
    """Ray, initialised: an existing connection, the cluster at ``RAY_ADDRESS``, or a new local instance
    listening on loopback only (:func:`~.local.start_local`)."""
    ray = import_ray()
    if not ray.is_initialized():
        path = os.pathsep.join(p for p in sys.path if p and os.path.isdir(p))
        options = {"runtime_env": {"env_vars": {"PYTHONPATH": path}}, "log_to_driver": False}
        if os.environ.get("RAY_ADDRESS"):
            ray.init(**options)
        else:
            start_local(ray, num_cpus=num_cpus, **options)
    return ray


def placement_strategy(spread: bool, world_size: int, nodes_that_fit_a_rank: int) -> str:
    """Ray's placement-group strategy: ``PACK`` unless spread; one rank per node when there are enough nodes.

    Ray's ``SPREAD`` is best effort: a node that is still releasing an earlier world's bundles lets every rank
    land on one node, so spreading is only guaranteed where it is possible at all.
    """
    if not spread:
        return "PACK"
    return "STRICT_SPREAD" if nodes_that_fit_a_rank >= world_size else "SPREAD"


def nodes_that_fit(ray: Any, cpus: float) -> int:
    """How many alive nodes of the cluster have ``cpus`` CPUs in all (free or not)."""
    return sum(1 for node in ray.nodes() if node.get("Alive") and node.get("Resources", {}).get("CPU", 0) >= cpus)


class RayWorld(CaseDispatch):
    """Rank actors of one (backend, world size), kept for many cases."""

    def __init__(self, spec: WorldSpec, registry: CaseRegistry, *, cpus_per_rank: float = 1.0,
                 spread: bool = False) -> None:
        self.spec = spec
        self.registry = registry
        self.cpus_per_rank = cpus_per_rank
        self.spread = spread
        self.actors: list[Any] = []
        self.pids: list[int] = []
        self.nodes: list[str] = []
        self.group: Any = None
        self.store_address: tuple[str, int] | None = None  # (host, port) of rank 0's TCP store once started
        self.start_s = float("nan")
        self.broken = False
        self._case_counter = 0

    # -- start --
    def start(self) -> None:
        """Place the actors, rendezvous through rank 0's TCP store and wait until every rank has joined."""
        begin = time.perf_counter()
        n = self.spec.world_size
        ray = ensure_ray(num_cpus=max(os.cpu_count() or 1, n * self.cpus_per_rank))
        from ray.util.placement_group import placement_group
        from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

        from pytest_dmlbench.world.ray.rank import RankActor

        deadline = time.monotonic() + self.spec.init_timeout_s
        strategy = placement_strategy(self.spread, n, nodes_that_fit(ray, self.cpus_per_rank) if self.spread else 0)
        self.group = placement_group([{"CPU": self.cpus_per_rank}] * n, strategy=strategy)
        if not self._wait([self.group.ready()], deadline):
            self.kill()
            raise WorldError(f"the Ray cluster could not place {n} rank(s) of {self.cpus_per_rank:g} CPU each "
                             f"({strategy}) within {self.spec.init_timeout_s:.0f} s; "
                             f"its resources: {ray.cluster_resources()}")
        actor_class = ray.remote(RankActor)
        self.actors = [
            actor_class.options(
                num_cpus=self.cpus_per_rank, max_concurrency=2,
                scheduling_strategy=PlacementGroupSchedulingStrategy(self.group, placement_group_bundle_index=r),
            ).remote(self.spec, r, self.registry)
            for r in range(n)
        ]
        places = self._get_all([a.where.remote() for a in self.actors], deadline, "starting")
        self.nodes = [node for node, _, _ in places]
        self.pids = [pid for _, _, pid in places]
        loopback = len(set(self.nodes)) == 1
        host = "127.0.0.1" if loopback else places[0][1]
        [port] = self._get_all([self.actors[0].host_store.remote(host)], deadline, "starting the TCP store")
        self.store_address = (host, port)
        readies = self._get_all([a.join.remote(host, port, loopback, tuple(self.nodes)) for a in self.actors], deadline,
                                "joining the process group")
        if not all(isinstance(r, Ready) for r in readies):
            self.kill()
            raise WorldError(f"Ray ranks answered {readies!r} instead of their ready messages")
        self.start_s = time.perf_counter() - begin

    def _wait(self, refs: list[Any], deadline: float) -> bool:
        import ray

        ready, _ = ray.wait(refs, num_returns=len(refs), timeout=max(0.0, deadline - time.monotonic()))
        return len(ready) == len(refs)

    def _get_all(self, refs: list[Any], deadline: float, what: str) -> list[Any]:
        """Every result, or a :class:`WorldError` naming the ranks that died or did not answer in time."""
        import ray

        if not self._wait(refs, deadline):
            done, _ = ray.wait(refs, num_returns=len(refs), timeout=0)
            late = [str(r) for r, ref in enumerate(refs) if ref not in done]
            self.kill()
            raise WorldError(f"Ray world of {self.spec.world_size} rank(s) ({self.spec.backend}): rank(s) "
                             f"{', '.join(late)} did not finish {what} within {self.spec.init_timeout_s:.0f} s")
        results = []
        for rank, ref in enumerate(refs):
            try:
                results.append(ray.get(ref))
            except ray.exceptions.RayError as exc:
                self.kill()
                raise WorldError(f"Ray rank {rank} failed while {what}: {exc}") from exc
        return results

    # -- run --
    def _send(self, message: CaseRequest) -> dict[Any, int]:
        return {actor.run_case.remote(message): rank for rank, actor in enumerate(self.actors)}

    def _ready(self, handles: list[Any], timeout_s: float) -> list[Any]:
        import ray

        ready, _ = ray.wait(handles, num_returns=1, timeout=timeout_s)
        return list(ready)

    def _receive(self, handle: Any, rank: int) -> tuple[RankOutcome, str | None]:
        import ray

        try:
            outcome, output = ray.get(handle)
        except ray.exceptions.RayActorError as exc:
            raise RankLost(f"Ray actor died ({_first_line(exc)})") from None
        assert isinstance(outcome, RankOutcome), outcome
        return outcome, str(output)

    def _collect_output(self, reports: list[RankReport]) -> None:
        """Nothing to do: each actor's answer carries its output."""

    def _collect_stacks(self, reports: list[RankReport], ranks: list[int]) -> None:
        import ray

        refs = {self.actors[rank].stacks.remote(): rank for rank in ranks}
        ready, _ = ray.wait(list(refs), num_returns=len(refs), timeout=STACK_WAIT_S)
        for ref in ready:
            try:
                reports[refs[ref]].stack = ray.get(ref)
            except ray.exceptions.RayError as exc:
                reports[refs[ref]].died = f"Ray actor died ({_first_line(exc)})"

    # -- end --
    def kill(self) -> None:
        """Kill every rank actor and remove the placement group."""
        self.broken = True
        ray = sys.modules.get("ray")
        if ray is None or not ray.is_initialized():
            return
        for actor in self.actors:
            ray.kill(actor, no_restart=True)
        self.actors = []
        if self.group is not None:
            from ray.util.placement_group import remove_placement_group

            remove_placement_group(self.group)
            self.group = None

    def stop(self, timeout_s: float = STOP_WAIT_S) -> None:
        """Ask the ranks to leave the process group, then kill the actors."""
        if not self.broken and self.actors:
            import ray

            refs = [actor.shutdown.remote() for actor in self.actors]
            ray.wait(refs, num_returns=len(refs), timeout=timeout_s)
        self.kill()


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0] if text else type(exc).__name__
