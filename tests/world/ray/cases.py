"""Case bodies for the Ray world's tests (imported by the Ray workers through PYTHONPATH)."""

from __future__ import annotations

import os
import time
from typing import Any


def passes(dist: Any) -> None:
    import torch
    import torch.distributed as td

    value = torch.tensor([float(dist.rank + 1)])
    td.all_reduce(value)
    expected = dist.world_size * (dist.world_size + 1) / 2
    assert float(value) == expected, (float(value), expected)
    print(f"rank {dist.rank} summed {float(value)}")


def raises_on_rank_1(dist: Any) -> None:
    import torch
    import torch.distributed as td

    if dist.rank == 1:
        raise ValueError("rank 1 refuses")
    td.all_reduce(torch.ones(1))  # rank 0 waits in a collective that rank 1 never joins


def hangs_on_rank_0(dist: Any) -> None:
    if dist.rank == 0:
        time.sleep(3600)


def dies_on_rank_1(dist: Any) -> None:
    if dist.rank == 1:
        os._exit(3)
    time.sleep(3600)


def sleeps(dist: Any) -> None:
    time.sleep(3600)
