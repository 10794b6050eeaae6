"""What the DTensor-based strategies (``fsdp``, ``tensor_parallel``) share.

Their parameters are DTensors (a shard per rank), so a rank's ``strategy.model.parameters()`` are not the
model's parameters. :meth:`ShardedStrategy.full_parameters` gathers them (collective); the twin is built
around a plain, unsharded copy of the model holding the gathered values.
"""

from __future__ import annotations

import copy
import importlib
from typing import Any

import torch
import torch.distributed as dist
from torch import nn

from pytest_dmlbench.errors import ConfigError
from pytest_dmlbench.strategies.base import LossFn, Strategy

# What the two strategies use, as (module, attribute): FSDP2 with replaceable collectives, DTensor with
# tensor-parallel styles, and device meshes over an existing group (torch 2.14.1 has them all).
_NEEDED = (
    ("torch.distributed.fsdp", "fully_shard"),
    ("torch.distributed.fsdp", "FSDPModule"),
    ("torch.distributed.fsdp._fully_shard._fsdp_collectives", "DefaultReduceScatter"),
    ("torch.distributed.tensor", "DTensor"),
    ("torch.distributed.tensor.parallel", "parallelize_module"),
    ("torch.distributed.device_mesh", "DeviceMesh"),
)


def sharding_support() -> str | None:
    """None when this torch has what ``fsdp`` and ``tensor_parallel`` use; else what it lacks."""
    for module_name, attribute in _NEEDED:
        try:
            module = importlib.import_module(module_name)
        except ImportError:
            return f"torch {torch.__version__} has no {module_name}"
        if not hasattr(module, attribute):
            return f"torch {torch.__version__} has no {module_name}.{attribute}"
    from torch.distributed.device_mesh import DeviceMesh
    from torch.distributed.fsdp import FSDPModule

    for owner, method in ((FSDPModule, "set_custom_reduce_scatter"), (DeviceMesh, "from_group")):
        if not hasattr(owner, method):
            return f"torch {torch.__version__} has no {owner.__name__}.{method}"
    return None


def require_sharding_support(name: str) -> None:
    """Raise a clear ConfigError when this torch lacks what strategy ``name`` uses."""
    missing = sharding_support()
    if missing is not None:
        raise ConfigError(f"strategy {name!r} needs a newer torch (tested with 2.14.1): {missing}")


def full_tensor(tensor: torch.Tensor) -> torch.Tensor:
    """The whole tensor of a DTensor (gathered: collective), or ``tensor`` itself, detached."""
    from torch.distributed.tensor import DTensor

    if isinstance(tensor, DTensor):
        return tensor.full_tensor().detach()
    return tensor.detach()


def world_mesh(device: torch.device) -> Any:
    """A one-dimensional ``DeviceMesh`` over the default process group (no new process group is created)."""
    from torch.distributed.device_mesh import DeviceMesh

    group = dist.group.WORLD
    assert group is not None
    return DeviceMesh.from_group(group, device.type)


class ShardedStrategy(Strategy):
    """A strategy whose parameters are DTensors; starts from rank 0's parameters and buffers."""

    optimizer: torch.optim.Optimizer  # made by the subclass once its parameters are sharded

    def __init__(self, model: nn.Module, **common: Any) -> None:
        super().__init__(model, **common)
        self._broadcast_parameters_from(0)  # before sharding: every shard is cut from rank 0's values
        self._template = copy.deepcopy(self.model).to("meta")  # the unsharded structure, without storage
        self.mesh = world_mesh(self.device)

    def full_parameters(self) -> list[torch.Tensor]:
        """The model's parameters, whole, in ``model.parameters()`` order (collective: call on every rank)."""
        return [full_tensor(p) for p in self.model.parameters()]

    def unsharded_model(self) -> nn.Module:
        """A plain copy of the model with the current parameters and buffers (collective)."""
        plain = copy.deepcopy(self._template).to_empty(device=self.device)
        plain.load_state_dict({name: full_tensor(value) for name, value in self.model.state_dict().items()})
        return plain

    def _model_for_twin(self) -> nn.Module:
        return self.unsharded_model()

    def _step(self, inputs: torch.Tensor | None, targets: torch.Tensor | None, loss_fn: LossFn) -> float:
        """A plain SGD step: the sharding's collectives run inside the model's forward and backward (FSDP2's
        hooks, DTensor's redistributions), so the step itself synchronises nothing."""
        x, y = self._begin_step(inputs, targets, sync_buffers=False)
        self.optimizer.zero_grad(set_to_none=True)
        loss = loss_fn(self.model(x), y)
        loss.backward()  # type: ignore[no-untyped-call]
        self.optimizer.step()
        return float(loss.detach())
