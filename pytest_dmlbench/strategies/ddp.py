"""``ddp``, ``fp16`` and ``powersgd``: torch's DistributedDataParallel with its communication hooks.

- ``ddp``: gradients all-reduced in buckets (``bucket_mb``, default 25) overlapped with the backward pass
  through torch's ``allreduce_hook``: ``4 P`` bytes per step for ``P`` float32 parameters.
- ``fp16``: ``fp16_compress_hook``: each bucket cast to float16, divided by the world size, all-reduced,
  cast back: ``2 P`` bytes per step. Error bound: relative L2 error of the averaged gradient at most
  ``(world_size + 2) * 2**-11`` (float16 rounding of each rank's term and of the sum), when no gradient
  entry is below float16's normal range.
- ``powersgd``: ``powerSGD_hook`` (rank ``matrix_rank``, default 1; exact all-reduce for the first
  ``start_iter`` steps, default 2; ``error_feedback`` and ``warm_start`` on by default). A gradient viewed as
  an ``n x m`` matrix is sent as ``P (n x r)`` and ``Q (m x r)``: ``4 r (n + m)`` bytes instead of
  ``4 n m``; 1-D gradients and matrices too small to gain go in one uncompressed all-reduce. Without error
  feedback the result is the orthogonal projection ``P P^T G`` of the exact averaged gradient ``G``, so
  ``||G'|| <= ||G||`` and ``<G - G', G'> = 0``.

All three (with ``broadcast_buffers``, default) also broadcast rank 0's buffers before every forward: the
buffers' bytes. The no-communication twin uses ``noop_hook`` and does not broadcast buffers.
Collectives issued by the hooks are Python-level ``torch.distributed`` calls, counted by
:mod:`pytest_dmlbench.measure.comm` like any other; the buffer broadcast is issued by DDP's C++ side and is added
to the byte count from the buffer sizes (:func:`pytest_dmlbench.measure.comm.account`).
"""

from __future__ import annotations

import inspect
from typing import Any

import torch
from torch import nn
from torch.distributed.algorithms.ddp_comm_hooks import default_hooks, powerSGD_hook
from torch.distributed.algorithms.ddp_comm_hooks.debugging_hooks import noop_hook
from torch.nn.parallel import DistributedDataParallel

from pytest_dmlbench.measure import comm
from pytest_dmlbench.strategies.base import LossFn, Strategy, register, split_common_options

# torch renamed DDP's per-forward buffer broadcast switch; both spellings keep the broadcast at init.
_BUFFER_SYNC_ARGUMENT = (
    "forward_sync_buffers"
    if "forward_sync_buffers" in inspect.signature(DistributedDataParallel.__init__).parameters
    else "broadcast_buffers"
)


@register("ddp")
class DDPStrategy(Strategy):
    """torch's DistributedDataParallel with the plain all-reduce hook."""

    name = "ddp"

    def __init__(
        self,
        model: nn.Module,
        *,
        bucket_mb: float = 25.0,
        broadcast_buffers: bool = True,
        **options: Any,
    ) -> None:
        common, hook_options = split_common_options(options)
        super().__init__(model, **common)
        sync_buffers = broadcast_buffers and self.communicate
        buffer_sync: dict[str, Any] = {_BUFFER_SYNC_ARGUMENT: sync_buffers}
        self.ddp = DistributedDataParallel(
            self.model,
            device_ids=[self.device.index] if self.device.type == "cuda" else None,
            bucket_cap_mb=bucket_mb,
            **buffer_sync,
        )
        if self.communicate:
            self._register_hook(**hook_options)
        else:
            self.ddp.register_comm_hook(None, noop_hook)
        self._buffer_bytes = comm.nbytes(list(self.model.buffers())) if sync_buffers else 0
        self.optimizer = self._optimizer(self.ddp.parameters())

    def _register_hook(self, **hook_options: Any) -> None:
        if hook_options:
            raise TypeError(f"{self.name} takes no options {sorted(hook_options)}")
        self.ddp.register_comm_hook(None, default_hooks.allreduce_hook)

    def _step(self, inputs: torch.Tensor | None, targets: torch.Tensor | None, loss_fn: LossFn) -> float:
        x, y = self._begin_step(inputs, targets, sync_buffers=False)
        self.optimizer.zero_grad(set_to_none=True)
        loss = loss_fn(self.ddp(x), y)
        loss.backward()  # type: ignore[no-untyped-call]
        self.optimizer.step()
        if self._buffer_bytes:
            comm.account("broadcast", self._buffer_bytes)
        return float(loss.detach())


@register("fp16")
class FP16Strategy(DDPStrategy):
    """DDP with ``fp16_compress_hook``: buckets all-reduced in float16."""

    name = "fp16"

    def _register_hook(self, **hook_options: Any) -> None:
        if hook_options:
            raise TypeError(f"{self.name} takes no options {sorted(hook_options)}")
        self.ddp.register_comm_hook(None, default_hooks.fp16_compress_hook)


@register("powersgd")
class PowerSGDStrategy(DDPStrategy):
    """DDP with ``powerSGD_hook`` (low-rank gradient compression)."""

    name = "powersgd"
    hook_options_from = "_build_powersgd"  # its parameters are this strategy's options (strategies.options)

    def _register_hook(self, **hook_options: Any) -> None:
        """Options: ``matrix_rank`` (1), ``start_iter`` (2), ``error_feedback`` (True), ``warm_start`` (True),
        ``seed`` (0)."""
        self._build_powersgd(**hook_options)

    def _build_powersgd(
        self,
        matrix_rank: int = 1,
        start_iter: int = 2,
        error_feedback: bool = True,
        warm_start: bool = True,
        seed: int = 0,
    ) -> None:
        self.powersgd_state = powerSGD_hook.PowerSGDState(
            process_group=None,
            matrix_approximation_rank=matrix_rank,
            start_powerSGD_iter=start_iter,
            use_error_feedback=error_feedback,
            warm_start=warm_start,
            random_seed=seed,
        )
        self.ddp.register_comm_hook(self.powersgd_state, powerSGD_hook.powerSGD_hook)
