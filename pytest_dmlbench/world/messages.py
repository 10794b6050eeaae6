"""Small typed records exchanged between the parent (pytest) process, the zygote and the ranks."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal


@dataclass(frozen=True)
class WorldSpec:
    """What a world is: its size, backend, rendezvous file, output folder and per-rank thread count."""

    world_id: int
    world_size: int
    backend: str
    store_path: str
    out_dir: str
    threads: int
    init_timeout_s: float


@dataclass(frozen=True)
class SpawnWorld:
    """Parent -> zygote: fork one process per rank (the rank ends of the pipes travel as fds)."""

    spec: WorldSpec


@dataclass(frozen=True)
class ZygoteReady:
    """Zygote -> parent: torch is loaded; how many CUDA devices NVML sees (counted without initialising CUDA)."""

    cuda_devices: int


@dataclass(frozen=True)
class Spawned:
    """Zygote -> parent: the pids of the new ranks, in rank order."""

    world_id: int
    pids: list[int]


@dataclass(frozen=True)
class Exited:
    """Zygote -> parent: a rank process ended with this ``os.waitpid`` status."""

    pid: int
    status: int


@dataclass(frozen=True)
class Ready:
    """Rank -> parent: the process group is initialised."""

    rank: int
    pid: int
    init_s: float


@dataclass(frozen=True)
class RunCase:
    """Parent -> ranks: run the registered case ``nodeid``."""

    case_id: int
    nodeid: str
    seed: int
    registry_args: tuple[str, ...]
    pickled_args: bytes
    measure_memory: bool
    options: dict[str, Any] = field(default_factory=dict)


Status = Literal["passed", "failed", "skipped", "xfailed"]


@dataclass(frozen=True)
class RankOutcome:
    """Rank -> parent: how the case went on this rank."""

    case_id: int
    rank: int
    status: Status
    message: str = ""
    traceback: str = ""
    duration_s: float = 0.0
    payload: dict[str, Any] = field(default_factory=dict)
    # Collectives the case issued on the default group (None when unknown), and why this rank's world must
    # be rebuilt before the next case ("" when it need not).
    collectives: int | None = None
    rebuild: str = ""


@dataclass(frozen=True)
class Shutdown:
    """Parent -> rank or zygote: leave cleanly."""
