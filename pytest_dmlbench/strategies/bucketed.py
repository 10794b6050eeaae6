"""``bucketed``: gradients flattened into buckets, each all-reduced asynchronously as soon as it is full.

Buckets are planned once (:func:`plan_buckets`) over the parameters in reverse registration order, the
order in which backward usually produces their gradients, up to ``bucket_mb`` megabytes each (default 25;
a larger tensor gets a bucket of its own; dtypes are never mixed). A post-accumulate-grad hook copies each
gradient, divided by the world size, into its bucket; when a bucket's last gradient arrives, its all-reduce
is started without waiting, in bucket order on every rank, so communication overlaps the rest of the
backward pass. All all-reduces are waited for before the optimizer step; the averaged buckets then back
the gradients. A parameter that got no gradient in a step contributes zeros (its bucket is sent after
backward).

Per step: ``4 P`` bytes (float32) in one all-reduce per bucket (``len(strategy.buckets)``), plus rank 0's
buffers broadcast before the forward when ``broadcast_buffers`` (default, DDP's rule).
Tested for: parameters equal the single-process reference and DDP's; ranks bit-identical; a variant that
drops its last bucket is caught.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch
import torch.distributed as dist
from torch import nn

from pytest_dmlbench.errors import ConfigError
from pytest_dmlbench.strategies.base import LossFn, Strategy, register


def plan_buckets(sizes_bytes: list[int], dtypes: list[Any], bucket_bytes: int) -> list[list[int]]:
    """Cut items (given in launch order) into consecutive buckets of at most ``bucket_bytes``.

    A new bucket starts when adding an item would exceed the cap or when the dtype changes; an item larger
    than the cap is alone in its bucket. Returns the item indices of each bucket.
    """
    if bucket_bytes <= 0:
        raise ConfigError(f"bucket size must be > 0 bytes, got {bucket_bytes}")
    if len(sizes_bytes) != len(dtypes):
        raise ValueError("sizes_bytes and dtypes must have the same length")
    buckets: list[list[int]] = []
    current: list[int] = []
    current_bytes = 0
    for index, (size, dtype) in enumerate(zip(sizes_bytes, dtypes, strict=True)):
        if current and (current_bytes + size > bucket_bytes or dtypes[current[0]] != dtype):
            buckets.append(current)
            current, current_bytes = [], 0
        current.append(index)
        current_bytes += size
    if current:
        buckets.append(current)
    return buckets


@dataclass
class _Bucket:
    params: list[nn.Parameter]
    offsets: list[int]
    buffer: torch.Tensor
    filled: set[int] = field(default_factory=set)
    work: Any = None
    launched: bool = False

    def slot(self, position: int) -> torch.Tensor:
        param = self.params[position]
        start = self.offsets[position]
        return self.buffer[start : start + param.numel()].view_as(param)


@register("bucketed")
class BucketedStrategy(Strategy):
    """Hand-written bucketed all-reduce overlapped with backward (what DDP's reducer does)."""

    name = "bucketed"

    def __init__(
        self,
        model: nn.Module,
        *,
        bucket_mb: float = 25.0,
        broadcast_buffers: bool = True,
        **common: Any,
    ) -> None:
        super().__init__(model, **common)
        self.broadcast_buffers = broadcast_buffers
        self._broadcast_parameters_from(0)
        params = [p for p in self.model.parameters() if p.requires_grad][::-1]
        plan = plan_buckets(
            [p.numel() * p.element_size() for p in params],
            [p.dtype for p in params],
            int(bucket_mb * 1024 * 1024),
        )
        self.buckets: list[_Bucket] = []
        self._where: dict[torch.Tensor, tuple[int, int]] = {}
        for bucket_index, indices in enumerate(plan):
            members = [params[i] for i in indices]
            offsets = [0]
            for p in members[:-1]:
                offsets.append(offsets[-1] + p.numel())
            total = offsets[-1] + members[-1].numel()
            buffer = torch.zeros(total, dtype=members[0].dtype, device=self.device)
            self.buckets.append(_Bucket(members, offsets, buffer))
            for position, p in enumerate(members):
                self._where[p] = (bucket_index, position)
                p.register_post_accumulate_grad_hook(self._on_grad_ready)  # type: ignore[no-untyped-call]
        self._in_backward = False
        self._next_launch = 0
        self.optimizer = self._optimizer(self.model.parameters())

    def _on_grad_ready(self, param: torch.Tensor) -> None:
        if not self._in_backward:
            return
        bucket_index, position = self._where[param]
        bucket = self.buckets[bucket_index]
        assert param.grad is not None
        # Copy and average in one pass over the gradient (the division DDP's hook does per bucket).
        torch.div(param.grad, self.world_size, out=bucket.slot(position))
        bucket.filled.add(position)
        self._launch_ready()

    def _launch_ready(self, force: bool = False) -> None:
        """Start the all-reduce of every full bucket, strictly in bucket order (same order on all ranks)."""
        while self._next_launch < len(self.buckets):
            bucket = self.buckets[self._next_launch]
            if len(bucket.filled) < len(bucket.params):
                if not force:
                    return
                for position in range(len(bucket.params)):
                    if position not in bucket.filled:
                        bucket.slot(position).zero_()
            bucket.work = self._reduce_bucket(self._next_launch, bucket.buffer)
            bucket.launched = True
            self._next_launch += 1

    def _reduce_bucket(self, index: int, buffer: torch.Tensor) -> Any:
        """Start the sum of ``buffer`` over ranks; returns the work handle (``None``: nothing to wait)."""
        if not self.communicate:
            return None
        return dist.all_reduce(buffer, async_op=True)

    def _step(self, inputs: torch.Tensor | None, targets: torch.Tensor | None, loss_fn: LossFn) -> float:
        x, y = self._begin_step(inputs, targets, self.broadcast_buffers)
        self.optimizer.zero_grad(set_to_none=True)
        for bucket in self.buckets:
            bucket.filled.clear()
            bucket.work = None
            bucket.launched = False
        self._next_launch = 0
        loss = loss_fn(self.model(x), y)
        self._in_backward = True
        try:
            loss.backward()  # type: ignore[no-untyped-call]
        finally:
            self._in_backward = False
        self._launch_ready(force=True)
        for bucket in self.buckets:
            if bucket.work is not None:
                bucket.work.wait()
            for position, param in enumerate(bucket.params):
                param.grad = bucket.slot(position)
        self.optimizer.step()
        return float(loss.detach())
