"""``ps``: a synchronous parameter server.

Every step each worker computes its shard's gradient and ``gather``s it, flattened, to the server (rank 0);
the server averages the workers' gradients, applies the SGD step (the optimizer state lives only on the
server) and ``broadcast``s the updated parameters back to every rank.

Modes:
- co-located (default): rank 0 is server and worker; ``world_size`` workers; rank r holds shard r.
- ``dedicated_server=True``: rank 0 only serves and trains on no data; the global batch is split over
  the ``world_size - 1`` worker ranks, rank r holding shard ``r - 1`` (``strategy.data_rank``,
  ``strategy.data_world_size``). On the server, :meth:`step` ignores its inputs (pass ``None``) and
  returns ``nan``. Needs ``world_size >= 2``.

Per step each rank hands ``4 P`` bytes (float32) to ``gather`` and ``4 P`` to ``broadcast``: ``8 P`` in
total; the server receives ``4 P`` per worker. With ``broadcast_buffers`` (default, DDP's rule) the first
worker's buffers are also broadcast before the forward.
Tested for: parameters equal the single-process reference and DDP's; ranks bit-identical.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.distributed as dist
from torch import nn

from pytest_dmlbench.errors import ConfigError
from pytest_dmlbench.strategies.base import LossFn, Strategy, broadcast_coalesced, register

SERVER_RANK = 0


@register("ps")
class ParameterServerStrategy(Strategy):
    """Synchronous parameter server on rank 0 (optionally a server that trains on no data)."""

    name = "ps"

    def __init__(
        self,
        model: nn.Module,
        *,
        dedicated_server: bool = False,
        broadcast_buffers: bool = True,
        **common: Any,
    ) -> None:
        super().__init__(model, **common)
        if dedicated_server and self.world_size < 2:
            raise ConfigError(
                "ps with dedicated_server=True needs world_size >= 2 (one server plus workers); "
                f"got world_size={self.world_size}. Use dedicated_server=False on a single rank."
            )
        self.dedicated_server = dedicated_server
        self.broadcast_buffers = broadcast_buffers
        self.is_server = self.rank == SERVER_RANK
        self.is_worker = not (dedicated_server and self.is_server)
        first_worker = 1 if dedicated_server else 0
        self.data_rank = self.rank - first_worker if self.is_worker else None
        self.data_world_size = self.world_size - first_worker
        self._buffer_source = first_worker
        self._params = [p for p in self.model.parameters() if p.requires_grad]
        self._broadcast_parameters_from(SERVER_RANK)
        self.optimizer = self._optimizer(self._params) if self.is_server else None

    def _step(self, inputs: torch.Tensor | None, targets: torch.Tensor | None, loss_fn: LossFn) -> float:
        if self.broadcast_buffers:
            self._broadcast_buffers_from(self._buffer_source)
        loss_value = float("nan")
        if self.is_worker:
            x = self._to_device(inputs, "inputs")
            y = self._to_device(targets, "targets")
            for p in self._params:
                p.grad = None
            loss = loss_fn(self.model(x), y)
            loss.backward()  # type: ignore[no-untyped-call]
            loss_value = float(loss.detach())
            flat_grad = torch.cat(
                [(p.grad if p.grad is not None else torch.zeros_like(p)).reshape(-1) for p in self._params]
            )
        else:
            flat_grad = torch.zeros(
                sum(p.numel() for p in self._params), dtype=self._params[0].dtype, device=self.device
            )
        average = self._gather_average(flat_grad)
        if self.optimizer is not None:
            offset = 0
            for p in self._params:
                p.grad = average[offset : offset + p.numel()].view_as(p).clone()
                offset += p.numel()
            self.optimizer.step()
        if self.communicate:
            broadcast_coalesced(self._params, SERVER_RANK)
        return loss_value

    def _gather_average(self, flat_grad: torch.Tensor) -> torch.Tensor:
        """On the server: the mean of the workers' gradients (its own only, without communication)."""
        if not self.communicate:
            return flat_grad
        received = [torch.empty_like(flat_grad) for _ in range(self.world_size)] if self.is_server else None
        dist.gather(flat_grad, received, dst=SERVER_RANK)
        if received is None:
            return flat_grad
        workers = received[1:] if self.dedicated_server else received
        total = workers[0].clone()
        for grad in workers[1:]:
            total.add_(grad)
        return total.div_(len(workers))
