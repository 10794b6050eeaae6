"""The one place where the plugin starts a local Ray instance: every Ray process listens on 127.0.0.1 only.

Ray's default for a new instance on Linux is to listen on the network: it takes the node's address from
the default route, and its gRPC servers (GCS, the raylet's node and object managers, every worker's core
worker, the driver's) then bind ``0.0.0.0``/``::``; the runtime-env agent binds the node's address. They bind
127.0.0.1 only when the node's address is 127.0.0.1, which Ray chooses only where it disables multi-node
clusters (``RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0``, its default on macOS and Windows). :func:`start_local`
turns that switch off while ``ray.init`` starts the instance (the driver reads it from
``ray._private.ray_constants``, which another import of Ray may have read already; the processes Ray
spawns read the environment), restores it afterwards, and checks the node's address, so a Ray version
that decides otherwise fails loudly instead of listening on the network. No dashboard, no usage-stats
reporting. Every worker runs :func:`~.worker_setup.setup_worker` at start, so the store Ray Train's
process group opens on its rank 0 listens on the node's address (127.0.0.1) too, and the worker's own
instance is the one Ray's address lookup finds when several run on the machine.

A real cluster is never started here: with ``RAY_ADDRESS`` set, or Ray already initialised, the callers
connect to that cluster as it is.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from pytest_dmlbench.errors import WorldError
from pytest_dmlbench.world.ray.worker_setup import HOOK

LOOPBACK = "127.0.0.1"
CLUSTER_SWITCH = "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"  # Ray's own name; "0" keeps a node on 127.0.0.1


@contextmanager
def _single_node_ray() -> Iterator[None]:
    """Ray's multi-node switch off in this process and in the processes it spawns meanwhile."""
    from ray._private import ray_constants

    saved_env = os.environ.get(CLUSTER_SWITCH)
    saved_flag = ray_constants.ENABLE_RAY_CLUSTER
    os.environ[CLUSTER_SWITCH] = "0"
    ray_constants.ENABLE_RAY_CLUSTER = False
    try:
        yield
    finally:
        ray_constants.ENABLE_RAY_CLUSTER = saved_flag
        if saved_env is None:
            os.environ.pop(CLUSTER_SWITCH, None)
        else:
            os.environ[CLUSTER_SWITCH] = saved_env


def start_local(ray: Any, **options: Any) -> None:
    """``ray.init`` of a new local instance listening on loopback only; ``options`` go to ``ray.init``."""
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    with _single_node_ray():
        # address="local": a new instance of our own, never one that ``ray start`` left running here
        runtime_env = {**options.pop("runtime_env", {}), "worker_process_setup_hook": HOOK}
        ray.init(address="local", include_dashboard=False, _node_ip_address=LOOPBACK, runtime_env=runtime_env,
                 **options)
    node = ray.util.get_node_ip_address()
    if node != LOOPBACK:
        ray.shutdown()
        raise WorldError(f"the local Ray instance took node address {node} instead of {LOOPBACK}, so it would "
                         f"listen on the network; it was shut down (Ray {ray.__version__})")
