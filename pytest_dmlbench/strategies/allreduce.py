"""``allreduce``: one blocking all-reduce per parameter gradient after the whole backward pass.

Per step each rank hands every gradient to its own ``all_reduce`` (sum, then divided by the world size):
``4 P`` bytes for ``P`` float32 parameters (``8 P`` for float64), in as many calls as the model has
parameter tensors, none overlapped with the backward pass. With ``broadcast_buffers`` (default, DDP's
rule) rank 0's buffers are broadcast before the forward, adding the buffers' bytes.
Tested for: parameters equal the single-process reference on the global batch; ranks bit-identical.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.distributed as dist
from torch import nn

from pytest_dmlbench.strategies.base import LossFn, Strategy, register


@register("allreduce")
class AllReduceStrategy(Strategy):
    """Plain data parallelism with a hand-written, per-parameter, blocking gradient all-reduce."""

    name = "allreduce"

    def __init__(
        self,
        model: nn.Module,
        *,
        broadcast_buffers: bool = True,
        **common: Any,
    ) -> None:
        super().__init__(model, **common)
        self.broadcast_buffers = broadcast_buffers
        self._broadcast_parameters_from(0)
        self.optimizer = self._optimizer(self.model.parameters())

    def _step(self, inputs: torch.Tensor | None, targets: torch.Tensor | None, loss_fn: LossFn) -> float:
        x, y = self._begin_step(inputs, targets, self.broadcast_buffers)
        self.optimizer.zero_grad(set_to_none=True)
        loss = loss_fn(self.model(x), y)
        loss.backward()  # type: ignore[no-untyped-call]
        self._average_gradients()
        self.optimizer.step()
        return float(loss.detach())

    def _average_gradients(self) -> None:
        """Sum every gradient over ranks and divide by the world size (a missing gradient counts as 0)."""
        for param in self.model.parameters():
            if not param.requires_grad:
                continue
            if param.grad is None:
                param.grad = torch.zeros_like(param)
            if self.communicate:
                dist.all_reduce(param.grad)
            param.grad.div_(self.world_size)
