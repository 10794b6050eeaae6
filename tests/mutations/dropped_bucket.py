"""Mutation: the bucketed strategy never issues its last bucket's all-reduce."""

from __future__ import annotations

from typing import Any

import torch

from pytest_dmlbench.strategies.bucketed import BucketedStrategy

_reduce_bucket = BucketedStrategy._reduce_bucket


def _drop_last(self: BucketedStrategy, index: int, buffer: torch.Tensor) -> Any:
    if index == len(self.buckets) - 1:
        return None
    return _reduce_bucket(self, index, buffer)


BucketedStrategy._reduce_bucket = _drop_last  # type: ignore[method-assign]
