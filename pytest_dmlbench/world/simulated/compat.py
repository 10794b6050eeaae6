"""The private torch surfaces simulated ranks rely on, checked against the torch versions they were tested on.

A torch outside the tested series, or one whose surfaces moved, makes every simulated case a skip that
names the difference (never a wrong value or a hang).
"""

from __future__ import annotations

import inspect
from functools import lru_cache

TESTED_SERIES = ("2.14",)  # torch major.minor series the simulated process group was tested with


def _missing_surfaces() -> list[str]:
    import torch.distributed as dist
    from torch._C import _distributed_c10d as c_c10d
    from torch.distributed import distributed_c10d as c10d

    missing = []
    if not isinstance(getattr(c10d, "_world", None), getattr(c10d, "_World", ())):
        missing.append("torch.distributed.distributed_c10d._world (a _World)")
    for name in ("default_pg", "pg_map", "pg_names", "pg_group_ranks", "pg_backend_config", "group_count",
                 "tags_to_pg", "pg_to_tag", "pg_coalesce_state", "comms"):
        if not isinstance(getattr(c10d._World, name, None), property):
            missing.append(f"_World.{name}")
    if not hasattr(c_c10d, "_set_thread_isolation_mode"):
        missing.append("torch._C._distributed_c10d._set_thread_isolation_mode")
    if "extended_api" not in inspect.signature(dist.Backend.register_backend).parameters:
        missing.append("Backend.register_backend(extended_api=...)")
    options = getattr(c_c10d, "_DistributedBackendOptions", None)
    for field in ("group_rank", "group_size", "group_id", "global_ranks_in_group"):
        if options is None or not hasattr(options, field):
            missing.append(f"_DistributedBackendOptions.{field}")
    return missing


@lru_cache(maxsize=4)
def incompatibility(version: str | None = None) -> str:
    """'' when this torch (or ``version``) is one simulated ranks were tested with; else the difference, as a
    skip reason."""
    import torch

    version = (version or torch.__version__).split("+")[0]
    series = ".".join(version.split(".")[:2])
    if series not in TESTED_SERIES:
        return (f"simulated ranks were tested with torch {', '.join(s + '.x' for s in TESTED_SERIES)} and rely on "
                f"private torch surfaces; this is torch {version}. Run with --dmlbench-launcher fork, or use a "
                "tested torch")
    missing = _missing_surfaces()
    if missing:
        return (f"torch {version} lacks private surfaces simulated ranks need: {', '.join(missing)}. "
                "Run with --dmlbench-launcher fork")
    return ""
