"""Small typed records exchanged between the parent (pytest) process, the zygote and the ranks."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from pytest_dmlbench.measure.memory import PeakMemory
from pytest_dmlbench.measure.rounds import BlockBudget
from pytest_dmlbench.results import MetricResult
from pytest_dmlbench.world.rank_warnings import Filter, RankWarning

# A kept world serves cases of any timeout; its group's own timeout (int32 milliseconds in places) stays
# far beyond them. A case timeout longer than this is cut short by the backend's.
GROUP_TIMEOUT_S = 7 * 24 * 3600.0


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
    pin_cores: bool = False  # each rank on one core of those the zygote may use (world/forked/pinning.py)
    # the group's own operation timeout (gloo's receive timeout, NCCL's watchdog): beyond any case's timeout,
    # so that a hang is reported by the parent at the case's timeout, with every rank's stack
    group_timeout_s: float = GROUP_TIMEOUT_S


@dataclass(frozen=True)
class SpawnWorld:
    """Parent -> zygote: fork one process per rank (the rank ends of the pipes travel as fds)."""

    spec: WorldSpec


@dataclass(frozen=True)
class ZygoteReady:
    """Zygote -> parent: torch is loaded; how many CUDA devices the ranks see (counted in a child process, so
    that the zygote never initialises CUDA), or why they could not be counted."""

    cuda_devices: int
    count_problem: str = ""


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
class CaseRequest:
    """Parent -> ranks: run the registered case ``nodeid`` with these arguments and seed."""

    case_id: int
    nodeid: str
    seed: int
    registry_args: tuple[str, ...]
    pickled_args: bytes
    measure_memory: bool
    block: BlockBudget | None = None  # a block of the paired gate replaces the case's own round counts
    warning_filters: tuple[Filter, ...] | None = None  # the item's warning filters, applied around the body


Status = Literal["passed", "failed", "skipped", "xfailed", "not_judged"]


@dataclass(frozen=True)
class RankOutcome:
    """Rank -> parent: how the case went on this rank, and what it measured.

    ``metrics`` are the results model's own objects, built once on the rank; ``peak_memory`` is this
    rank's peak over the case (cases that use the ``dmlbench`` fixture), maxed over ranks by the parent;
    ``property_verdict`` is what the ranks agreed about a falsified ``@given`` property.
    """

    case_id: int
    rank: int
    status: Status
    message: str = ""
    traceback: str = ""
    duration_s: float = 0.0
    metrics: dict[str, MetricResult] = field(default_factory=dict)
    peak_memory: PeakMemory | None = None
    notes: tuple[str, ...] = ()
    property_verdict: dict[str, Any] | None = None
    # Collectives the case issued on the default group (None when unknown), and why this rank's world must
    # be rebuilt before the next case ("" when it need not).
    collectives: int | None = None
    rebuild: str = ""
    # where the body's time went (``BlockProfile.to_dict``), for a block run with ``profile`` set
    profile: dict[str, Any] | None = None
    # the warnings the body raised that the item's filters show, for pytest's warnings summary
    warnings: tuple[RankWarning, ...] = ()
    # whether the case advanced the default group's sequence number (collective or point-to-point); a world
    # whose ranks failed without touching their group is kept
    group_touched: bool = True


@dataclass(frozen=True)
class Shutdown:
    """Parent -> rank or zygote: leave cleanly."""
