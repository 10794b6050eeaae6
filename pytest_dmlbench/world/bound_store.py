"""Rank 0's TCP store listening on one address only, for the worlds the plugin builds and for Ray Train's.

torch's ``TCPStore`` binds every interface (``::``) when it opens its own socket, whatever host it is
given. :func:`bound_store` binds the socket to ``host`` itself and hands it over (``master_listen_fd``).
:func:`bind_rendezvous_stores` runs in every worker of the Ray instance the plugin starts
(``world/ray/worker_setup.py``): it makes
``torch.distributed``'s rendezvous (``env://`` and ``tcp://``, which Ray Train's ``init_process_group``
uses) create rank 0's store the same way, so a ``framework: ray_train`` fit listens on the address Ray
Train chose (127.0.0.1 for the embedded instance) and nowhere else. The hook replaces a private torch
function, ``torch.distributed.rendezvous._create_c10d_store`` (installed through ``measure/torch_patches.py``,
for the life of the worker); ``tests/world/ray/test_loopback.py`` fails when a torch release changes it so
that the store listens on the network again.
"""

from __future__ import annotations

import importlib
import os
import socket
from datetime import timedelta
from typing import Any

from pytest_dmlbench.measure import torch_patches


def bound_store(host: str, port: int, world_size: int, timeout: timedelta, **options: Any) -> Any:
    """A master ``TCPStore`` listening on ``host:port`` only (port 0: the OS picks one; read ``store.port``)."""
    import torch.distributed as td

    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    listener = socket.create_server((host, port), family=family)
    return td.TCPStore(host, int(listener.getsockname()[1]), world_size,  # type: ignore[attr-defined,unused-ignore]
                       is_master=True, timeout=timeout, master_listen_fd=listener.detach(), **options)


def _agent_hosts_store(rendezvous: Any, hostname: str, port: int) -> bool:
    """Whether torchelastic's agent already hosts the store (then every rank is a client)."""
    serves = getattr(rendezvous, "_agent_store_serves", None)  # torch >= 2.7; before, the variable alone
    if serves is not None:
        return bool(serves(hostname, port))
    return os.environ.get("TORCHELASTIC_USE_AGENT_STORE") == "True"


def bind_rendezvous_stores() -> torch_patches.Patch | None:
    """Make torch's rendezvous create rank 0's store with :func:`bound_store` (a Ray worker setup hook); the
    patch, or None when the hook is installed already."""
    # imported by name: ``torch.distributed`` also exports a function called ``rendezvous``
    rendezvous: Any = importlib.import_module("torch.distributed.rendezvous")

    create = rendezvous._create_c10d_store
    if getattr(create, "bound_to_host", False):
        return None

    def create_bound(hostname: str, port: int, rank: int, world_size: int, timeout: timedelta,
                     use_libuv: bool = True) -> Any:
        if rank != 0 or _agent_hosts_store(rendezvous, hostname, port):
            return create(hostname, port, rank, world_size, timeout, use_libuv)
        return bound_store(hostname, port, world_size, timeout, use_libuv=use_libuv)

    create_bound.__dict__["bound_to_host"] = True  # marks the hook as installed (see above)
    return torch_patches.install(rendezvous, "_create_c10d_store", create_bound,
                                 by=f"{__name__}.bind_rendezvous_stores")
