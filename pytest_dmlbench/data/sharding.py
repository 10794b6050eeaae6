"""The sharding convention: the global batch is cut into equal contiguous shards, rank r holding shard r."""

from __future__ import annotations

from typing import TypeVar

import torch

from pytest_dmlbench.errors import ConfigError

Batch = TypeVar("Batch", torch.Tensor, tuple[torch.Tensor, ...])


def shard_bounds(batch_size: int, rank: int, world_size: int) -> tuple[int, int]:
    """``[start, stop)`` of ``rank``'s shard of a global batch of ``batch_size`` samples."""
    if world_size < 1:
        raise ConfigError(f"world_size must be >= 1, got {world_size}")
    if not 0 <= rank < world_size:
        raise ConfigError(f"rank {rank} is outside a world of size {world_size}")
    if batch_size % world_size:
        raise ConfigError(
            f"global batch of {batch_size} samples does not split into {world_size} equal shards; "
            f"use a global batch size that is a multiple of {world_size}"
        )
    size = batch_size // world_size
    return rank * size, (rank + 1) * size


def shard(batch: Batch, rank: int, world_size: int) -> Batch:
    """``rank``'s contiguous shard of a tensor, or of every tensor of a tuple (all the same length)."""
    if isinstance(batch, torch.Tensor):
        start, stop = shard_bounds(batch.shape[0], rank, world_size)
        return batch[start:stop]
    lengths = {t.shape[0] for t in batch}
    if len(lengths) != 1:
        raise ConfigError(f"tensors of one batch must have the same length, got lengths {sorted(lengths)}")
    start, stop = shard_bounds(lengths.pop(), rank, world_size)
    return tuple(t[start:stop] for t in batch)
