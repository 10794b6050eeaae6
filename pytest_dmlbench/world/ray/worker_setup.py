"""What every worker process of the Ray instance the plugin starts does first (Ray's
``worker_process_setup_hook``, named by :data:`HOOK`).

- torch's rendezvous makes rank 0's store listen on the node's address only
  (:func:`~pytest_dmlbench.world.bound_store.bind_rendezvous_stores`);
- ``RAY_ADDRESS`` names this worker's own instance. Code inside a worker that looks its instance up by
  itself (Ray's state API with no address, as Ray Train's placement-group cleaner does) otherwise scans the
  machine and fails with "Found multiple active Ray instances" as soon as two local instances run: the
  paired gate runs three (the session's and both block servers'), and a ``framework: ray_train`` fit then
  hung until its block timed out, ending REF's block server for the rest of a nightly.
"""

from __future__ import annotations

import os

from pytest_dmlbench.world.bound_store import bind_rendezvous_stores

HOOK = "pytest_dmlbench.world.ray.worker_setup.setup_worker"


def setup_worker() -> None:
    bind_rendezvous_stores()
    pin_ray_address()


def pin_ray_address() -> None:
    """Set ``RAY_ADDRESS`` to the GCS address of the instance this worker belongs to (kept when set)."""
    import ray

    os.environ.setdefault("RAY_ADDRESS", ray.get_runtime_context().gcs_address)
