"""``tensor_parallel``: Megatron-style tensor parallelism on DTensor (``parallelize_module``).

Pairs of linear layers are split over all ranks: in an ``nn.Sequential`` (anywhere in the model),
a ``Linear`` followed, after parameter-free modules only (``ReLU``, ``GELU``, ``Dropout`` ...), by another
``Linear`` is a pair (taken greedily from the front, so ``Linear, ReLU, Linear, ReLU, Linear`` has one). The
first layer is ``ColwiseParallel`` (its output features split, each rank computing its slice of the hidden
activation), the second ``RowwiseParallel`` (its input features split; the partial outputs are summed with
one all-reduce). The hidden width must be divisible by the world size. Every other parameter stays a
plain tensor, replicated.

Data: unlike the data-parallel strategies, every rank computes on the *same* samples, so the whole global
batch is one shard: ``data_rank = 0`` and ``data_world_size = 1`` on every rank (``batch_for`` hands every
rank the whole batch) and the returned loss is the loss of the global batch. One step therefore equals
single-process SGD on the global batch, as for the other strategies; only the split differs (model, not
data). There is no gradient synchronisation: each rank's shard gradient is already complete, and a
replicated parameter gets the same gradient on every rank (everything after a pair is computed from its
all-reduced output; a pair's input gradient is all-reduced before it flows further back).

Per step, per pair with ``F`` output features on a batch of ``B`` samples (itemsize ``s``): one
``all_reduce`` of the pair's output, ``B F s`` bytes, in the forward; plus, when the pair's input needs a
gradient (layers before it), one ``all_reduce`` of that gradient, ``B F_in s`` bytes, in the backward. These
are DTensor's functional collectives, counted by :mod:`pytest_dmlbench.measure.comm`.

The no-communication twin runs the same DTensor layers with both all-reduces left out (each rank keeps its
partial sums).
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from pytest_dmlbench.errors import ConfigError
from pytest_dmlbench.strategies.base import register
from pytest_dmlbench.strategies.sharded import ShardedStrategy, require_sharding_support

require_sharding_support("tensor_parallel")  # before the imports below: a clear error on an older torch

from torch.distributed.device_mesh import DeviceMesh  # noqa: E402
from torch.distributed.tensor import DTensor, Partial, Replicate  # noqa: E402
from torch.distributed.tensor.parallel import (  # noqa: E402
    ColwiseParallel,
    ParallelStyle,
    RowwiseParallel,
    parallelize_module,
)


def linear_pairs(model: nn.Module) -> list[tuple[str, str]]:
    """Qualified names of the (column-wise, row-wise) ``Linear`` pairs, in model order.

    Only an ``nn.Sequential``'s children run in the order they are listed, so pairs are sought there; any
    other module is searched for nested ``nn.Sequential``s.
    """
    pairs: list[tuple[str, str]] = []

    def visit(module: nn.Module, prefix: str) -> None:
        first: str | None = None  # a Linear waiting for its partner
        for name, child in module.named_children():
            qualified = f"{prefix}{name}"
            if isinstance(module, nn.Sequential) and isinstance(child, nn.Linear):
                if first is None:
                    first = qualified
                else:
                    pairs.append((first, qualified))
                    first = None
            elif isinstance(module, nn.Sequential) and not any(True for _ in child.parameters()):
                continue  # parameter-free (ReLU, Dropout ...): a pair may span it
            else:
                first = None
                visit(child, f"{qualified}.")

    visit(model, "")
    return pairs


class _ReplicateKeepingPartialGrad(torch.autograd.Function):
    """A local tensor as a replicated DTensor whose gradient is handed back unreduced (the twin's input)."""

    @staticmethod
    def forward(ctx: Any, local: torch.Tensor, mesh: DeviceMesh) -> DTensor:
        return DTensor.from_local(local, mesh, [Replicate()], run_check=False)

    @staticmethod
    def backward(ctx: Any, grad: DTensor) -> tuple[torch.Tensor, None]:
        return grad.to_local(), None


class _LocalColwise(ColwiseParallel):
    """``ColwiseParallel`` whose backward does not all-reduce the input gradient (twin only)."""

    @staticmethod
    def _prepare_input_fn(input_layouts: Any, desired_input_layouts: Any, mod: nn.Module, inputs: Any,
                          device_mesh: DeviceMesh) -> Any:
        local = inputs[0]
        if isinstance(local, DTensor):
            return local
        return _ReplicateKeepingPartialGrad.apply(local, device_mesh)


@register("tensor_parallel")
class TensorParallelStrategy(ShardedStrategy):
    """Column-wise then row-wise split of each pair of linear layers; every rank sees the whole batch."""

    name = "tensor_parallel"

    def __init__(self, model: nn.Module, **common: Any) -> None:
        super().__init__(model, **common)
        self.data_rank = 0
        self.data_world_size = 1
        self.pairs = linear_pairs(self.model)
        if not self.pairs:
            raise ConfigError(
                "tensor_parallel: the model has no pair of nn.Linear layers in an nn.Sequential "
                "(Linear, parameter-free modules, Linear) to split"
            )
        modules = dict(self.model.named_modules())
        for first, _ in self.pairs:
            width = modules[first].weight.shape[0]
            if width % self.world_size:
                raise ConfigError(
                    f"tensor_parallel: hidden width {width} of layer {first!r} is not divisible by the world "
                    f"size {self.world_size}"
                )
        parallelize_module(self.model, self.mesh, self.parallel_plan())
        self.optimizer = self._optimizer(self.model.parameters())

    def parallel_plan(self) -> dict[str, ParallelStyle]:
        """The ``parallelize_module`` plan: each pair column-wise then row-wise (twin: no all-reduces)."""
        plan: dict[str, ParallelStyle] = {}
        for first, second in self.pairs:
            if self.communicate:
                plan[first], plan[second] = ColwiseParallel(), RowwiseParallel()
            else:
                plan[first], plan[second] = _LocalColwise(), RowwiseParallel(output_layouts=Partial())
        return plan
