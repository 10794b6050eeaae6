"""What makes a simulated rank look like one of torchrun's processes to a script, and the check that a case on
several simulated ranks really used its world.

Each rank gets the variables the forked ranks get (``world/torchrun_env.py``: ``RANK``, ``LOCAL_RANK``,
``WORLD_SIZE``, ``MASTER_ADDR``/``MASTER_PORT`` ...) through its own view of ``os.environ``
(``rank_environ``). ``MASTER_ADDR:MASTER_PORT`` is a live ``TCPStore`` on the loopback, served by the
pytest process for the world's lifetime, as the forked world's rank 0 serves one. What only a whole process can
do (``os._exit``) raises :class:`ProcessWide` on the rank that asks, naming it, instead of ending every rank.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from datetime import timedelta
from typing import Any, NoReturn

from pytest_dmlbench.world.simulated.shared import RankState
from pytest_dmlbench.world.torchrun_env import RankPlace, run_id, torchrun_variables

HOST = "127.0.0.1"
RANK_THREAD_PREFIX = "dmlbench-simulated-rank-"  # the name of every rank thread (runner.py)
STORE_TIMEOUT = timedelta(seconds=60)
STANDS_IN_FOR = ("gloo",)  # the backend a script may ask for on simulated ranks: its group is adopted


def serve_master_store() -> Any:
    """A ``TCPStore`` server on the loopback at a port the system chose (read back from ``.port``)."""
    from torch._C._distributed_c10d import TCPStore

    return TCPStore(HOST, 0, is_master=True, wait_for_workers=False, timeout=STORE_TIMEOUT)


def rank_variables(rank: int, world_size: int, port: int, world_id: int) -> dict[str, str]:
    """torchrun's variables for ``rank`` of a simulated world (one node) whose master store is at ``port``."""
    return torchrun_variables(RankPlace.single_node(rank, world_size), HOST, port, f"{run_id(world_id)}-simulated")


def group_unused(world_size: int, ranks: Sequence[RankState]) -> str:
    """Why a passing case on more than one rank is suspect when none of its ranks issued a collective or a
    point-to-point call on the world's groups ('' when some rank did, or on one rank)."""
    if world_size < 2 or any(state.last for state in ranks):
        return ""
    return (f"none of the {world_size} simulated ranks issued a collective or a point-to-point call: each rank "
            "ran the case on its own, so it tested nothing distributed (a script that reads RANK/WORLD_SIZE only "
            "when it believes it was launched, or checks torch.cuda before init_process_group, trains one model "
            "per rank). Make the case use its world's process group, or, when ranks that never communicate are "
            "what the case means, say so: @pytest.mark.dmlbench(..., communicates=False)")


class ProcessWide(RuntimeError):
    """A rank asked for something only a whole process can do; simulated ranks are threads of one."""


@contextmanager
def exits_refused() -> Iterator[None]:
    """``os._exit`` on a rank thread raises :class:`ProcessWide` instead of ending the pytest process (and every
    other rank with it); other threads keep torch's and Python's own."""
    original = os._exit

    def _exit(status: int) -> NoReturn:
        name = threading.current_thread().name
        if not name.startswith(RANK_THREAD_PREFIX):
            original(status)
        raise ProcessWide(
            f"os._exit({status}) on simulated rank {name.removeprefix(RANK_THREAD_PREFIX)} would end the whole pytest "
            "process: simulated ranks are threads of one process, so a process's exit cannot be one rank's. "
            "Use sys.exit (run_script reports its status per rank), or run the case with --dmlbench-launcher fork")

    os._exit = _exit
    try:
        yield
    finally:
        os._exit = original
