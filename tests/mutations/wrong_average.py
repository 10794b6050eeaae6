"""Mutation: the hand-written all-reduce divides the summed gradients by ``world_size * 1.00001``."""

from __future__ import annotations

import torch.distributed as dist

from pytest_dmlbench.strategies.allreduce import AllReduceStrategy


def _average_gradients(self: AllReduceStrategy) -> None:
    for param in self.model.parameters():
        if param.grad is not None:
            dist.all_reduce(param.grad)
            param.grad.div_(self.world_size * 1.00001)


AllReduceStrategy._average_gradients = _average_gradients  # type: ignore[method-assign]
