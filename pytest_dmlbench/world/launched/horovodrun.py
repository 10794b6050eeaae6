"""Ranks started by ``horovodrun`` (Gloo mode): its variables mapped onto ``torch.distributed``'s.

``horovodrun`` sets ``HOROVOD_RANK``, ``HOROVOD_SIZE``, ``HOROVOD_LOCAL_RANK``, ``HOROVOD_LOCAL_SIZE``,
``HOROVOD_CROSS_RANK``, ``HOROVOD_CROSS_SIZE`` and ``HOROVOD_HOSTNAME`` for each slot, and
``HOROVOD_GLOO_RENDEZVOUS_ADDR``/``_PORT`` for its own HTTP rendezvous (horovod/runner/gloo_run.py), but
none of ``RANK``, ``WORLD_SIZE``, ``MASTER_ADDR``, ``MASTER_PORT``. The rank numbers map one to one; the
address of ``torch.distributed``'s store is agreed through Horovod itself (rank 0 opens the store on its
host's address only, never every interface, and broadcasts the port), unless ``MASTER_ADDR`` and
``MASTER_PORT`` were passed in (``horovodrun -x``).
"""

from __future__ import annotations

from collections.abc import Mapping, MutableMapping
from datetime import timedelta
from typing import Any

from pytest_dmlbench.errors import ConfigError
from pytest_dmlbench.world.bound_store import bound_store

HOROVOD_VARS = ("HOROVOD_RANK", "HOROVOD_SIZE")
RANK_VARS = {"RANK": "HOROVOD_RANK", "WORLD_SIZE": "HOROVOD_SIZE", "LOCAL_RANK": "HOROVOD_LOCAL_RANK",
             "LOCAL_WORLD_SIZE": "HOROVOD_LOCAL_SIZE"}


def under_horovodrun(environ: Mapping[str, str]) -> bool:
    """True when ``horovodrun`` (Gloo mode) started this process as one of its ranks."""
    return all(name in environ for name in HOROVOD_VARS)


def adopt_rank_variables(environ: MutableMapping[str, str]) -> None:
    """Set ``RANK``, ``WORLD_SIZE``, ``LOCAL_RANK`` and ``LOCAL_WORLD_SIZE`` from Horovod's (set ones win)."""
    for torch_name, horovod_name in RANK_VARS.items():
        if horovod_name in environ:
            environ.setdefault(torch_name, environ[horovod_name])


def adopt_store_address(environ: MutableMapping[str, str], timeout: timedelta = timedelta(minutes=5)) -> Any:
    """Set ``MASTER_ADDR``/``MASTER_PORT`` to rank 0's store, agreed through Horovod (``hvd.init()`` runs
    here, so the ``horovod`` strategy finds it initialised). Rank 0 opens that store itself, listening on its
    host's address only, and returns it (pass it to ``init_process_group(store=...)``: ``env://`` would open
    one on every interface); other ranks, and every rank when the address was given, get None."""
    if "MASTER_ADDR" in environ and "MASTER_PORT" in environ:
        return None
    hvd = _horovod_torch()
    hvd.init()
    store = None
    chosen = None
    if hvd.rank() == 0:
        host = _host(environ)
        store = bound_store(host, 0, int(environ["HOROVOD_SIZE"]), timeout, wait_for_workers=False)
        chosen = (host, store.port)
    addr, port = hvd.broadcast_object(chosen, root_rank=0, name="dmlbench.store_address")
    environ["MASTER_ADDR"], environ["MASTER_PORT"] = str(addr), str(port)
    return store


def _horovod_torch() -> Any:
    try:
        import horovod.torch as hvd
    except ModuleNotFoundError as exc:
        raise ConfigError("the HOROVOD_RANK/HOROVOD_SIZE variables say horovodrun started this process, but "
                          "horovod.torch cannot be imported here to agree on the process group's address; "
                          "pass MASTER_ADDR and MASTER_PORT instead (horovodrun -x MASTER_ADDR=... "
                          "-x MASTER_PORT=...)") from exc
    return hvd


def _host(environ: Mapping[str, str]) -> str:
    name = environ.get("HOROVOD_HOSTNAME", "localhost")
    return "127.0.0.1" if name in ("localhost", "127.0.0.1") else name
