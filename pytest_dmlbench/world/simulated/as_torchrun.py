"""What makes a simulated rank look like one of torchrun's processes to a script, and the check that a case on
several simulated ranks really used its world.

Each rank gets the variables the forked ranks get (``world/torchrun_env.py``: ``RANK``, ``LOCAL_RANK``,
``WORLD_SIZE``, ``MASTER_ADDR``/``MASTER_PORT`` ...) through its own view of ``os.environ``
(``rank_environ``). ``MASTER_ADDR:MASTER_PORT`` is a live ``TCPStore`` on the loopback, served by the
pytest process for the world's lifetime, as the forked world's rank 0 serves one.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import timedelta
from typing import Any

from pytest_dmlbench.world.simulated.shared import RankState
from pytest_dmlbench.world.torchrun_env import RankPlace, run_id, torchrun_variables

HOST = "127.0.0.1"
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
