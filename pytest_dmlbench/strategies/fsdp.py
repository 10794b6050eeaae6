"""``fsdp``: PyTorch's FSDP2 (``torch.distributed.fsdp.fully_shard``), per layer and on the root.

Data-parallel like the others: each rank gets its shard of the global batch, the loss is the shard mean.
Every layer is its own FSDP unit: walking from the root through containers (``nn.Sequential``,
``nn.ModuleList``, ``nn.ModuleDict``), each module that is not a container and has parameters is wrapped
with ``fully_shard``; then the root is (it holds whatever parameters are left). Each parameter is cut
along dim 0 into ``N`` shards of ``ceil(d0 / N)`` rows (the last ones padded). ``optimizer.step`` updates
this rank's shard only. ``reshard_after_forward`` (default True) frees each unit's gathered parameters
after its forward and all-gathers them again for its backward; False keeps them until the backward
(FSDP2 never reshards the root after forward).

Per step, per unit with ``S`` bytes of padded shards on this rank (``S = sum ceil(d0 / N) * (numel / d0) *
itemsize``): ``all_gather_single`` ``S`` in the forward, and again in the backward when
``reshard_after_forward``; ``reduce_scatter_single`` of the whole padded gradient, ``N S``. Buffers are
not synchronised (each rank keeps its own BatchNorm statistics). Gradients are averaged in the
reduce-scatter (FSDP2's rule: ``ReduceOp.AVG`` for float32, a sum divided before and after for float64).
Both collectives are ``torch.distributed`` calls, counted by :mod:`pytest_dmlbench.measure.comm`.

The no-communication twin keeps FSDP2 and its copies but replaces both collectives by local copies
(:class:`LocalAllGather`: this rank's shard into every slot; :class:`LocalReduceScatter`: this rank's
chunk of its own gradient).
"""

from __future__ import annotations

from typing import Any

import torch
import torch.distributed as dist
from torch import nn

from pytest_dmlbench.errors import ConfigError
from pytest_dmlbench.strategies.base import register
from pytest_dmlbench.strategies.sharded import ShardedStrategy, require_sharding_support

require_sharding_support("fsdp")  # before the imports below: a clear error on an older torch

from torch.distributed.fsdp import FSDPModule, fully_shard  # noqa: E402
from torch.distributed.fsdp._fully_shard._fsdp_collectives import (  # noqa: E402
    DefaultAllGather,
    DefaultReduceScatter,
)

_CONTAINERS = (nn.Sequential, nn.ModuleList, nn.ModuleDict)


class LocalAllGather(DefaultAllGather):
    """All-gather without communication: every slot of the output gets this rank's own input."""

    def __call__(self, output_tensor: torch.Tensor, input_tensor: torch.Tensor, group: dist.ProcessGroup,
                 async_op: bool = False) -> dist.Work | None:
        output_tensor.view(group.size(), -1).copy_(input_tensor.reshape(1, -1).clone())  # input may be a slot
        return None


class LocalReduceScatter(DefaultReduceScatter):
    """Reduce-scatter without communication: the output is this rank's chunk of its own input."""

    def __call__(self, output_tensor: torch.Tensor, input_tensor: torch.Tensor, group: dist.ProcessGroup,
                 op: Any, async_op: bool = False) -> dist.Work | None:
        output_tensor.copy_(input_tensor.view(group.size(), -1)[group.rank()].view_as(output_tensor))
        return None


def fsdp_units(model: nn.Module) -> list[nn.Module]:
    """The layers FSDP shards on their own: non-container modules with parameters, found through containers."""
    units: list[nn.Module] = []

    def visit(module: nn.Module) -> None:
        for child in module.children():
            if isinstance(child, _CONTAINERS):
                visit(child)
            elif any(True for _ in child.parameters()):
                units.append(child)

    visit(model)
    return units


@register("fsdp")
class FSDPStrategy(ShardedStrategy):
    """FSDP2 (``fully_shard``) on every layer and on the root; parameters, gradients and momentum sharded."""

    name = "fsdp"

    def __init__(self, model: nn.Module, *, reshard_after_forward: bool = True, **common: Any) -> None:
        if not isinstance(reshard_after_forward, bool):
            raise ConfigError(f"fsdp: reshard_after_forward must be True or False, got {reshard_after_forward!r}")
        super().__init__(model, **common)
        self.reshard_after_forward = reshard_after_forward
        self.units = fsdp_units(self.model)
        for unit in self.units:
            fully_shard(unit, mesh=self.mesh, reshard_after_forward=reshard_after_forward)
        fully_shard(self.model, mesh=self.mesh, reshard_after_forward=reshard_after_forward)
        reduce_scatter = self._reduce_scatter()
        for module in [*self.units, self.model]:
            assert isinstance(module, FSDPModule)
            if not self.communicate:
                module.set_custom_all_gather(LocalAllGather())
            if reduce_scatter is not None:
                module.set_custom_reduce_scatter(reduce_scatter)
        self.optimizer = self._optimizer(self.model.parameters())

    def _reduce_scatter(self) -> DefaultReduceScatter | None:
        """The gradient reduce-scatter in place of FSDP2's own (None: FSDP2's own)."""
        return None if self.communicate else LocalReduceScatter()
