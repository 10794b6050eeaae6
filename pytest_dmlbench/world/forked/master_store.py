"""The store behind ``MASTER_ADDR:MASTER_PORT`` in a forked world, so that those variables name something real.

The forked world's group meets through a file store; code written for torchrun expects a TCP store at
``MASTER_ADDR:MASTER_PORT`` (its ``tcp://`` init method, or a ``TCPStore`` client of its own). Rank 0 serves
one on loopback only (port chosen by the OS) and publishes the port through the world's file store; every
rank reads it there.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from pytest_dmlbench.world.bound_store import bound_store

HOST = "127.0.0.1"
_PORT_KEY = "dmlbench/master_port"


def serve_master_store(world_store: Any, rank: int, world_size: int, timeout: timedelta) -> tuple[Any, int]:
    """Rank 0: start the TCP store and publish its port; every rank: read the port. Returns (store or None, port);
    rank 0 keeps the store alive as long as the world."""
    if rank == 0:
        store = bound_store(HOST, 0, world_size, timeout, wait_for_workers=False)
        port = int(store.port)
        world_store.set(_PORT_KEY, str(port))
        return store, port
    return None, int(world_store.get(_PORT_KEY).decode())
