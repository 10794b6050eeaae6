"""The Ray instance ``framework: ray_train`` experiments run on (pytest process side).

With ``RAY_ADDRESS`` unset, a Ray Train experiment starts an embedded local Ray instance
(:func:`~pytest_dmlbench.world.ray.local.start_local`: listening on 127.0.0.1 only, no dashboard, no
usage-stats reporting) sized to this machine's cores. With ``RAY_ADDRESS`` set, experiments run on that
cluster and it is left running. Either way the pytest process stays a Ray driver only while Ray Train items
run (the teardown of the last of consecutive ones disconnects it, shutting the embedded instance down; the
next one, if it is a Ray Train item too, fits on the same instance): a process that forks while it is a Ray
driver breaks the driver's connections to Ray (an in-process case that starts worlds, a DataLoader with
workers), and the session then hung at its end, in ``ray.shutdown``.
Ray is an optional dependency: :data:`RAY_MISSING` says how to install it.
"""

from __future__ import annotations

import importlib.util
import os
from dataclasses import dataclass
from typing import Any

from pytest_dmlbench.world.ray.local import start_local

RAY_MISSING = ('framework ray_train needs Ray Train, which is not installed; '
               'install it with: pip install "pytest-dmlbench[ray]"')
# The object store only carries the experiment and its figures: keep it small on a shared machine.
OBJECT_STORE_BYTES = 128 * 1024**2
# Ray Train's settings on the embedded instance, for every process of the driver's job (its controller's too):
# a local instance is never drained or preempted, so the preemption watcher (an actor, a Python process of its
# own) has nothing to watch; and the controller sees that the workers finished at its next poll of them, every
# 2 s by default. Both cost a fit seconds on a 2-core machine (docs/how-to/experiments.md). A cluster at
# RAY_ADDRESS keeps its own settings.
EMBEDDED_TRAIN_SETTINGS = {"RAY_TRAIN_ENABLE_PREEMPTION_WATCHER": "0", "RAY_TRAIN_HEALTH_CHECK_INTERVAL_S": "0.5"}


def ray_installed() -> bool:
    """Whether ``ray`` can be imported (checked without importing it)."""
    return importlib.util.find_spec("ray") is not None


@dataclass(frozen=True)
class RayConnection:
    """A live Ray instance: whether this process started it, and the CPUs it offers."""

    started_here: bool
    cpus: float
    connected_here: bool = False  # this call made the process a Ray driver (``ray.init``)


def _cluster_cpus(ray: Any) -> float:
    return float(ray.cluster_resources().get("CPU", 0.0))


_connected_here = False  # this process made itself a Ray driver through connect() and has not shut down since


def is_driver_here() -> bool:
    """Whether :func:`connect` made this process a Ray driver that :func:`shutdown` has not yet disconnected."""
    return _connected_here


def connect() -> RayConnection:
    """Attach to the running Ray instance, to ``RAY_ADDRESS``'s cluster, or start an embedded one."""
    import ray

    if ray.is_initialized():
        return RayConnection(started_here=False, cpus=_cluster_cpus(ray))
    global _connected_here
    if os.environ.get("RAY_ADDRESS"):
        ray.init(log_to_driver=True)
        _connected_here = True
        return RayConnection(started_here=False, cpus=_cluster_cpus(ray), connected_here=True)
    cpus = os.cpu_count() or 1
    start_local(ray, num_cpus=cpus, object_store_memory=OBJECT_STORE_BYTES, log_to_driver=True,
                runtime_env={"env_vars": EMBEDDED_TRAIN_SETTINGS})
    _connected_here = True
    return RayConnection(started_here=True, cpus=float(cpus), connected_here=True)


def shutdown() -> None:
    """Disconnect this process from Ray, stopping the embedded instance (a no-op when not connected)."""
    global _connected_here
    import ray

    _connected_here = False
    if ray.is_initialized():
        ray.shutdown()


def cpus_per_worker(cluster_cpus: float, world_size: int) -> float:
    """CPUs each Ray Train worker asks for: one, or an equal share when the cluster has fewer than one per
    worker (so ``world_size`` workers always fit; Ray accepts fractions of a CPU in steps of 0.0001)."""
    if world_size < 1:
        raise ValueError(f"world_size must be >= 1, got {world_size}")
    if cluster_cpus <= 0:
        raise ValueError("the Ray cluster offers no CPU; Ray Train workers cannot be placed")
    share = int(cluster_cpus / world_size * 100) / 100
    return min(1.0, max(share, 0.01))
