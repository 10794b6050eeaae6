"""The environment torchrun gives each worker, for the ranks of the plugin's own worlds (forked and Ray).

A rank sets these once, after joining its world and before the guard's clean snapshot, so the per-case state
guard puts them back after every case. The list is torchrun's own (``LocalElasticAgent._start_workers``):
``RANK``, ``LOCAL_RANK``, ``GROUP_RANK``, ``ROLE_RANK``, ``ROLE_NAME``, ``LOCAL_WORLD_SIZE``, ``WORLD_SIZE``,
``GROUP_WORLD_SIZE``, ``ROLE_WORLD_SIZE``, ``MASTER_ADDR``, ``MASTER_PORT``, ``TORCHELASTIC_RESTART_COUNT``,
``TORCHELASTIC_MAX_RESTARTS``, ``TORCHELASTIC_RUN_ID`` and ``TORCHELASTIC_USE_AGENT_STORE`` (``True``: the
store at ``MASTER_ADDR:MASTER_PORT`` is already served, so torch's rendezvous connects to it as a client).

Left out: ``TORCH_NCCL_ASYNC_ERROR_HANDLING`` (read when a NCCL group is created; setting it would change how
an NCCL error ends a rank of the plugin's worlds, whose own group was created without it), ``OMP_NUM_THREADS``
(torchrun only passes the launcher's on; the world sets the rank's thread count itself) and
``TORCHELASTIC_ERROR_FILE`` (the launcher's error-file protocol).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class RankPlace:
    """Where one rank sits: its global rank, its rank on its node, and its node's rank among the nodes."""

    rank: int
    world_size: int
    local_rank: int
    local_world_size: int
    group_rank: int
    group_world_size: int

    @classmethod
    def single_node(cls, rank: int, world_size: int) -> RankPlace:
        """Every rank on one node (the forked world)."""
        return cls(rank, world_size, rank, world_size, 0, 1)

    @classmethod
    def from_nodes(cls, rank: int, nodes: Sequence[str]) -> RankPlace:
        """``nodes[r]`` is the node of rank ``r``; nodes are ranked by their first rank, ranks on a node by rank."""
        order = list(dict.fromkeys(nodes))
        mine = nodes[rank]
        local = [r for r, node in enumerate(nodes) if node == mine]
        return cls(rank, len(nodes), local.index(rank), len(local), order.index(mine), len(order))


def torchrun_variables(place: RankPlace, master_addr: str, master_port: int, run_id: str) -> dict[str, str]:
    """The variables torchrun sets for the worker at ``place`` of a world whose store is at the master address."""
    return {
        "RANK": str(place.rank),
        "LOCAL_RANK": str(place.local_rank),
        "GROUP_RANK": str(place.group_rank),
        "ROLE_RANK": str(place.rank),
        "ROLE_NAME": "default",
        "LOCAL_WORLD_SIZE": str(place.local_world_size),
        "WORLD_SIZE": str(place.world_size),
        "GROUP_WORLD_SIZE": str(place.group_world_size),
        "ROLE_WORLD_SIZE": str(place.world_size),
        "MASTER_ADDR": master_addr,
        "MASTER_PORT": str(master_port),
        "TORCHELASTIC_RESTART_COUNT": "0",
        "TORCHELASTIC_MAX_RESTARTS": "0",
        "TORCHELASTIC_RUN_ID": run_id,
        "TORCHELASTIC_USE_AGENT_STORE": "True",
    }


def run_id(world_id: int) -> str:
    """The ``TORCHELASTIC_RUN_ID`` of one world: the same on every rank, different for each world of a run."""
    return f"dmlbench-world-{world_id}"
