"""Data for the cases: synthetic sets, a local CIFAR-10 reader and the sharding convention."""

from __future__ import annotations

from pytest_dmlbench.data.cifar import CIFAR10_URL, load_cifar10
from pytest_dmlbench.data.sharding import shard, shard_bounds
from pytest_dmlbench.data.synthetic import (
    synthetic_classification,
    synthetic_images,
    synthetic_segmentation,
    token_sequences,
)
from pytest_dmlbench.errors import DataError

__all__ = [
    "CIFAR10_URL",
    "DataError",
    "load_cifar10",
    "shard",
    "shard_bounds",
    "synthetic_classification",
    "synthetic_images",
    "synthetic_segmentation",
    "token_sequences",
]
