"""The Strategy contract, the registry of strategy names and :func:`build`.

Convention shared by every strategy: the caller splits the global batch into equal contiguous shards
(:func:`pytest_dmlbench.data.shard` with ``strategy.data_rank`` and ``strategy.data_world_size``), passes
this rank's shard to :meth:`Strategy.step`, and the loss is the mean over the shard. One step therefore
equals one single-process SGD step on the whole global batch (exactly for models without batch-coupled
layers; BatchNorm normalises per shard, as under DDP).

Every strategy counts the bytes it hands to communication operations during a step
(``comm_bytes_last_step``, counted by :mod:`pytest_dmlbench.measure.comm`) and can be built as its
no-communication twin (``communicate=False``, or :meth:`Strategy.twin`): the same computation with the
communication left out, used to measure exposed communication. A twin does not train correctly.
"""

from __future__ import annotations

import abc
import copy
import importlib
from collections.abc import Callable, Sequence
from typing import Any, ClassVar

import torch
import torch.distributed as dist
from torch import nn

from pytest_dmlbench.errors import ConfigError
from pytest_dmlbench.measure import comm

LossFn = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]
StrategyFactory = Callable[..., "Strategy"]



class Strategy(abc.ABC):
    """Base class: one synchronous data-parallel SGD step per :meth:`step` call.

    Attributes:
        model: the module being trained on this rank (for ``pipeline``, this rank's stage).
        device: where the model lives and where inputs are moved (``cpu`` for gloo, ``cuda:i`` for nccl).
        data_rank, data_world_size: which shard of the global batch this rank must be given and into how
            many shards the global batch is cut (``data_rank`` is ``None`` on a rank that takes no data).
        comm_bytes_last_step: bytes this rank handed to communication operations in the last step.
        comm_bytes_by_op: the same, per operation name (``all_reduce``, ``broadcast``, ``send`` ...).
    """

    name: ClassVar[str] = ""

    def __init__(
        self,
        model: nn.Module,
        *,
        lr: float,
        momentum: float = 0.0,
        communicate: bool = True,
        device: torch.device | str | None = None,
    ) -> None:
        require_process_group(self.name)
        if lr <= 0:
            raise ConfigError(f"lr must be > 0, got {lr!r}")
        if not 0.0 <= momentum < 1.0:
            raise ConfigError(f"momentum must be in [0, 1), got {momentum!r}")
        self.rank = dist.get_rank()
        self.world_size = dist.get_world_size()
        self.device = resolve_device(device)
        self.lr = lr
        self.momentum = momentum
        self.communicate = communicate
        # The strategy's own options as given to build(); twin() rebuilds from exactly these.
        self.build_options: dict[str, Any] | None = None
        self.model = model.to(self.device)
        self.data_rank: int | None = self.rank
        self.data_world_size = self.world_size
        self.comm_bytes_last_step = 0
        self.comm_bytes_by_op: dict[str, int] = {}

    def step(self, inputs: torch.Tensor | None, targets: torch.Tensor | None, loss_fn: LossFn) -> float:
        """Run one training step on this rank's shard and return this rank's shard loss."""
        with comm.instrument_collectives() as count:
            loss = self._step(inputs, targets, loss_fn)
        self.comm_bytes_last_step = count.bytes
        self.comm_bytes_by_op = count.bytes_by_op
        return loss

    @abc.abstractmethod
    def _step(self, inputs: torch.Tensor | None, targets: torch.Tensor | None, loss_fn: LossFn) -> float:
        """The step itself; communication through ``torch.distributed`` module attributes (counted)."""

    def twin(self) -> Strategy:
        """A new strategy of the same kind and options on a copy of the model, without communication.

        Must be called on every rank (building some strategies is itself collective, e.g. DDP).
        """
        if self.build_options is None:
            raise ConfigError(
                f"this {type(self).__name__} was constructed directly, so its options are unknown; "
                f"make it with pytest_dmlbench.strategies.build({self.name!r}, ...) to be able to build its twin"
            )
        options = {**self.build_options, "communicate": False, "device": self.device}
        return build(self.name, copy.deepcopy(self._model_for_twin()), lr=self.lr, momentum=self.momentum, **options)

    def _model_for_twin(self) -> nn.Module:
        """The module a twin is built around (a copy is taken): the model this strategy was built with."""
        return self.model

    def _begin_step(self, inputs: torch.Tensor | None, targets: torch.Tensor | None,
                    sync_buffers: bool) -> tuple[torch.Tensor, torch.Tensor]:
        """Inputs on the device, and rank 0's buffers taken when ``sync_buffers``."""
        x = self._to_device(inputs, "inputs")
        y = self._to_device(targets, "targets")
        if sync_buffers:
            self._broadcast_buffers_from(0)
        return x, y

    def _broadcast_buffers_from(self, src: int) -> None:
        """DDP's buffer rule: before the forward, every rank takes ``src``'s buffers (BatchNorm stats)."""
        buffers = list(self.model.buffers())
        if buffers and self.communicate and self.world_size > 1:
            broadcast_coalesced(buffers, src)

    def _broadcast_parameters_from(self, src: int) -> None:
        """Start from ``src``'s parameters and buffers (done once, when the strategy is built)."""
        tensors = [*self.model.parameters(), *self.model.buffers()]
        if tensors and self.communicate and self.world_size > 1:
            broadcast_coalesced(tensors, src)

    def _optimizer(self, params: Any) -> torch.optim.Optimizer:
        return torch.optim.SGD(params, lr=self.lr, momentum=self.momentum)

    def _to_device(self, tensor: torch.Tensor | None, what: str) -> torch.Tensor:
        if tensor is None:
            raise ConfigError(f"strategy {self.name!r} on rank {self.rank} needs {what}, got None")
        return tensor.to(self.device, non_blocking=True)


# The constructor arguments every strategy takes (passed through to :class:`Strategy`).
COMMON_OPTIONS = ("lr", "momentum", "communicate", "device")


def split_common_options(options: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """``options`` as (arguments of :class:`Strategy` itself, the strategy's own)."""
    common = {k: v for k, v in options.items() if k in COMMON_OPTIONS}
    return common, {k: v for k, v in options.items() if k not in COMMON_OPTIONS}


def require_process_group(name: str) -> None:
    """Raise a clear error when no default process group is initialised."""
    if not dist.is_available() or not dist.is_initialized():
        raise ConfigError(
            f"strategy {name!r} needs an initialised default process group; "
            "run it inside a dmlbench case or call torch.distributed.init_process_group first"
        )


def resolve_device(device: torch.device | str | None) -> torch.device:
    """The explicit device, else ``cuda:<current>`` under nccl, else ``cpu``."""
    if device is not None:
        return torch.device(device)
    if dist.get_backend() == "nccl":
        return torch.device("cuda", torch.cuda.current_device())
    return torch.device("cpu")


def broadcast_coalesced(tensors: Sequence[torch.Tensor], src: int, group: dist.ProcessGroup | None = None) -> None:
    """Overwrite ``tensors`` with ``src``'s values: one broadcast per dtype."""
    by_dtype: dict[torch.dtype, list[torch.Tensor]] = {}
    for tensor in tensors:
        by_dtype.setdefault(tensor.dtype, []).append(tensor)
    for group_tensors in by_dtype.values():
        flat = torch.cat([t.detach().reshape(-1) for t in group_tensors])
        dist.broadcast(flat, src, group=group)
        offset = 0
        for tensor in group_tensors:
            n = tensor.numel()
            with torch.no_grad():
                tensor.copy_(flat[offset : offset + n].view_as(tensor))
            offset += n


_REGISTRY: dict[str, StrategyFactory] = {}
# Where each name is implemented: imported on first use; the module calls register(name) for it.
# ``robust`` lives with the robust aggregators and must register a Strategy subclass under that name.
_LAZY_MODULES: dict[str, str] = {
    "ddp": "pytest_dmlbench.strategies.ddp",
    "fp16": "pytest_dmlbench.strategies.ddp",
    "powersgd": "pytest_dmlbench.strategies.ddp",
    "allreduce": "pytest_dmlbench.strategies.allreduce",
    "bucketed": "pytest_dmlbench.strategies.bucketed",
    "ps": "pytest_dmlbench.strategies.parameter_server",
    "local_sgd": "pytest_dmlbench.strategies.local_sgd",
    "pipeline": "pytest_dmlbench.strategies.pipeline",
    "robust": "pytest_dmlbench.robust.strategy",
    "deepspeed": "pytest_dmlbench.strategies.zero",
    "horovod": "pytest_dmlbench.strategies.horovod_allreduce",
    "fsdp": "pytest_dmlbench.strategies.fsdp",
    "tensor_parallel": "pytest_dmlbench.strategies.tensor_parallel",
}


def register(name: str) -> Callable[[StrategyFactory], StrategyFactory]:
    """Register a factory ``(model, *, lr, momentum, communicate, device, **options) -> Strategy``."""

    def decorate(factory: StrategyFactory) -> StrategyFactory:
        if name in _REGISTRY and _REGISTRY[name] is not factory:
            raise ConfigError(f"strategy name {name!r} is already registered")
        _REGISTRY[name] = factory
        return factory

    return decorate


def available() -> list[str]:
    """Every strategy name :func:`build` accepts."""
    return sorted(set(_REGISTRY) | set(_LAZY_MODULES))


def factory_for(name: str) -> StrategyFactory:
    """The registered factory of strategy ``name``, importing its module on first use."""
    if name not in _REGISTRY and name in _LAZY_MODULES:
        module = _LAZY_MODULES[name]
        try:
            importlib.import_module(module)
        except ModuleNotFoundError as exc:
            if exc.name is None or not module.startswith(exc.name):
                raise
            raise ConfigError(f"strategy {name!r} is provided by {module}, which is not installed") from exc
    factory = _REGISTRY.get(name)
    if factory is None:
        raise ConfigError(f"unknown strategy {name!r}; available: {', '.join(available())}")
    return factory


def build(name: str, model: nn.Module, *, lr: float, momentum: float = 0.0, **options: Any) -> Strategy:
    """Build strategy ``name`` around ``model`` (collective: call it on every rank).

    ``options`` are the strategy's own (e.g. ``bucket_mb`` for ``bucketed``, ``period`` for ``local_sgd``)
    plus ``communicate=False`` for the no-communication twin and ``device=`` to override the device.
    """
    strategy = factory_for(name)(model, lr=lr, momentum=momentum, **options)
    if not isinstance(strategy, Strategy):
        raise ConfigError(f"strategy factory for {name!r} returned {type(strategy).__name__}, not a Strategy")
    strategy.build_options = {k: v for k, v in options.items() if k not in ("communicate", "device")}
    return strategy
