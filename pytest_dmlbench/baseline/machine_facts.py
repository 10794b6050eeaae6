"""What the environment report and the results' ``machine`` section record beyond the machine key:
torchvision, cuDNN, GPU details, which process-group backends this torch build has, and the environment
variables that steer distributed runs. Reading them imports torch (lazily) and, with GPUs, initialises CUDA.
"""

from __future__ import annotations

import importlib.metadata
import os
import platform
from collections.abc import Mapping
from typing import Any

import psutil

DISTRIBUTED_VARIABLES = (
    "MASTER_ADDR", "MASTER_PORT", "RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "OMP_NUM_THREADS",
    "CUDA_VISIBLE_DEVICES", "TORCH_DISTRIBUTED_DEBUG",
)
VARIABLE_PREFIXES = ("NCCL_", "GLOO_", "TORCH_NCCL_")
BACKENDS = ("gloo", "nccl", "mpi", "ucc")


def distributed_variables(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """The set variables among :data:`DISTRIBUTED_VARIABLES` and those starting with ``NCCL_``,
    ``GLOO_`` or ``TORCH_NCCL_``, sorted by name (unset ones are left out)."""
    env = os.environ if environ is None else environ
    return {name: env[name] for name in sorted(env)
            if name in DISTRIBUTED_VARIABLES or name.startswith(VARIABLE_PREFIXES)}


def backends_available() -> dict[str, bool]:
    """Whether this torch build has each process-group backend (``torch.distributed.is_*_available``)."""
    import torch.distributed as td

    found = {}
    for name in BACKENDS:
        check = getattr(td, f"is_{name}_available", None)
        found[name] = bool(check()) if check is not None and td.is_available() else False
    return found


def _torchvision() -> str | None:
    """The installed torchvision's version, from its package metadata: importing torchvision to ask it cost
    about 2 s of every run that judged a figure, for a fact that is informational only."""
    try:
        return importlib.metadata.version("torchvision")
    except importlib.metadata.PackageNotFoundError:
        return None


def gpu_details() -> list[dict[str, Any]]:
    """Name, memory (GB, 10^9 bytes) and compute capability of every visible CUDA device."""
    import torch

    if not torch.cuda.is_available():
        return []
    details = []
    for index in range(torch.cuda.device_count()):
        props = torch.cuda.get_device_properties(index)
        details.append({"index": index, "name": props.name, "memory_gb": round(props.total_memory / 1e9, 1),
                        "capability": f"{props.major}.{props.minor}"})
    return details


def software_facts() -> dict[str, Any]:
    """torchvision, cuDNN and GPU details, backends, distributed variables, physical cores."""
    import torch

    cudnn = torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None  # type: ignore[no-untyped-call,unused-ignore]
    return {
        "physical_cores": psutil.cpu_count(logical=False),
        "platform": platform.platform(),
        "torchvision": _torchvision(),
        "cudnn": cudnn,
        "gpu_details": gpu_details(),
        "backends_available": backends_available(),
        "distributed_env": distributed_variables(),
    }
