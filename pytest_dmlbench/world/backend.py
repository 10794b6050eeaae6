"""Backend and device selection (pure functions, testable without a GPU)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class BackendChoice:
    """The backend a world will use, or why the case must be skipped."""

    backend: str
    skip_reason: str | None = None


def select_backend(requested: str, world_size: int, cuda_devices: int) -> BackendChoice:
    """``auto``: nccl when there is a CUDA device per rank, else gloo. ``nccl`` without enough devices: skip."""
    if requested == "gloo":
        return BackendChoice("gloo")
    if requested == "auto":
        return BackendChoice("nccl" if cuda_devices >= world_size else "gloo")
    if requested == "nccl":
        if cuda_devices < world_size:
            return BackendChoice(
                "nccl",
                f"nccl needs one CUDA device per rank: world size {world_size}, {cuda_devices} device(s) visible; "
                "use --dmlbench-backend gloo or a smaller world",
            )
        return BackendChoice("nccl")
    raise ValueError(f"unknown backend {requested!r}")


def device_for(backend: str, rank: int) -> str:
    """Rank r uses ``cuda:r`` under nccl, the CPU under gloo."""
    return f"cuda:{rank}" if backend == "nccl" else "cpu"

