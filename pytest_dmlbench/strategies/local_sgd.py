"""``local_sgd``: every rank steps on its own shard; parameters are averaged every ``period`` steps.

The federated-averaging workload: between synchronisations the ranks' models drift apart. On every
``period``-th step, after the local optimizer step, the parameters and the floating-point buffers
(BatchNorm statistics) are summed with one ``all_reduce`` per dtype and divided by the world size.
Momentum buffers stay local. Per synchronising step: ``4 (P + B)`` bytes (float32, ``B`` buffer
elements); other steps send nothing, so ``4 (P + B) / period`` bytes per step on average.
Tested for: with ``period=1`` and no momentum one step equals a ``ddp`` step (averaging the updated
parameters equals updating with the averaged gradient); ranks bit-identical after each synchronisation.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.distributed as dist
from torch import nn

from pytest_dmlbench.errors import ConfigError
from pytest_dmlbench.strategies.base import LossFn, Strategy, register


@register("local_sgd")
class LocalSGDStrategy(Strategy):
    """Local SGD / federated averaging with a fixed synchronisation period."""

    name = "local_sgd"

    def __init__(
        self,
        model: nn.Module,
        *,
        period: int = 1,
        **common: Any,
    ) -> None:
        if not isinstance(period, int) or period < 1:
            raise ConfigError(f"local_sgd period must be an integer >= 1, got {period!r}")
        super().__init__(model, **common)
        self.period = period
        self.steps_done = 0
        self._broadcast_parameters_from(0)
        self.optimizer = self._optimizer(self.model.parameters())

    @property
    def synchronised(self) -> bool:
        """Whether the last step ended with an averaging (ranks hold identical parameters then)."""
        return self.steps_done % self.period == 0

    def _step(self, inputs: torch.Tensor | None, targets: torch.Tensor | None, loss_fn: LossFn) -> float:
        x, y = self._begin_step(inputs, targets, sync_buffers=False)
        self.optimizer.zero_grad(set_to_none=True)
        loss = loss_fn(self.model(x), y)
        loss.backward()  # type: ignore[no-untyped-call]
        self.optimizer.step()
        self.steps_done += 1
        if self.synchronised:
            self._average_state()
        return float(loss.detach())

    def _average_state(self) -> None:
        tensors: list[torch.Tensor] = list(self.model.parameters())
        tensors += [b for b in self.model.buffers() if b.is_floating_point()]
        by_dtype: dict[torch.dtype, list[torch.Tensor]] = {}
        for tensor in tensors:
            by_dtype.setdefault(tensor.dtype, []).append(tensor)
        with torch.no_grad():
            for group in by_dtype.values():
                flat = torch.cat([t.detach().reshape(-1) for t in group])
                if not self.communicate:
                    continue
                dist.all_reduce(flat)
                flat.div_(self.world_size)
                offset = 0
                for tensor in group:
                    tensor.copy_(flat[offset : offset + tensor.numel()].view_as(tensor))
                    offset += tensor.numel()
