"""``pipeline``: the model cut into ``stages`` consecutive stages on consecutive ranks, GPipe schedule.

Layout: ``world_size = stages * replicas``; rank ``r`` runs stage ``r % stages`` of replica
``r // stages``. Every rank of a replica is given that replica's shard of the global batch
(``strategy.data_rank`` is the replica index, ``strategy.data_world_size`` the number of replicas); the
first stage uses the inputs, the last stage the targets, the others ignore both.

Schedule (GPipe): the shard is cut into ``micro_batches`` equal micro-batches; all forwards run first
(stage ``s`` receives each micro-batch's activation from ``s - 1`` and sends its output to ``s + 1``),
then all backwards in reverse order (the last stage back-propagates ``loss_m / micro_batches``; the
others receive the output gradient from ``s + 1`` and send their input gradient to ``s - 1``). Gradients
accumulate over micro-batches, so the step equals one step of the unsplit model on the shard. With more
than one replica, each stage's gradients are then averaged over its replicas with one flat
``all_reduce`` in a per-stage group, and every rank applies SGD to its own stage.

Per step a stage boundary carries one activation and one gradient per micro-batch (``send``/``recv`` of
``A`` bytes each, ``A`` the activation bytes of one micro-batch) plus a 10-element int64 shape header per
step; each stage all-reduces ``4 P_s`` bytes (float32, ``P_s`` its parameters) when replicas > 1.
Returned loss: on the last stage, the shard's mean loss; on every other stage ``nan``.
``Strategy.model`` is this rank's stage. Stage outputs must be single tensors. Buffers (BatchNorm
statistics) stay local to each stage rank (no broadcast). The no-communication twin
(:meth:`PipelineStrategy.twin`, after one communicating step) feeds zeros of the recorded shapes instead
of received tensors.

Models must be splittable: an ``nn.Sequential`` (cut into consecutive runs of children balanced by
parameter count, see :func:`split_stages`) or a model with ``pipeline_stages(n) -> list[nn.Module]``.
Tested for: output, loss and gradients equal the unsplit model's, micro-batching included.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.distributed as dist
from torch import nn

from pytest_dmlbench.errors import ConfigError
from pytest_dmlbench.strategies.base import (
    LossFn,
    Strategy,
    broadcast_coalesced,
    register,
    require_process_group,
)

_HEADER_LEN = 10
_DTYPES = [torch.float32, torch.float64, torch.float16, torch.bfloat16]


def split_stages(model: nn.Module, stages: int) -> list[nn.Module]:
    """Cut ``model`` into ``stages`` consecutive stages (sharing the model's parameters)."""
    if stages < 1:
        raise ConfigError(f"pipeline stages must be >= 1, got {stages}")
    custom = getattr(model, "pipeline_stages", None)
    if callable(custom):
        parts = list(custom(stages))
        if len(parts) != stages:
            raise ConfigError(f"{type(model).__name__}.pipeline_stages({stages}) returned {len(parts)} stages")
        return parts
    if not isinstance(model, nn.Sequential):
        raise ConfigError(
            f"pipeline cannot split a {type(model).__name__}: pass an nn.Sequential or give the model a "
            "pipeline_stages(n) method returning n consecutive modules"
        )
    return [nn.Sequential(*layers) for layers in balance(list(model.children()), stages)]


def balance(layers: list[nn.Module], stages: int) -> list[list[nn.Module]]:
    """Consecutive, non-empty runs of ``layers`` with parameter counts as even as a greedy cut allows."""
    if len(layers) < stages:
        raise ConfigError(f"cannot cut {len(layers)} layers into {stages} pipeline stages; use fewer stages")
    sizes = [sum(p.numel() for p in layer.parameters()) for layer in layers]
    total = sum(sizes)
    parts: list[list[nn.Module]] = [[] for _ in range(stages)]
    stage, cumulative = 0, 0
    for index, (layer, size) in enumerate(zip(layers, sizes, strict=True)):
        later_stages = stages - stage - 1
        if parts[stage] and later_stages > 0:
            share_reached = cumulative >= total * (stage + 1) / stages
            only_enough_left = len(layers) - index == later_stages
            if share_reached or only_enough_left:
                stage += 1
        parts[stage].append(layer)
        cumulative += size
    return parts


@register("pipeline")
class PipelineStrategy(Strategy):
    """GPipe pipeline parallelism with point-to-point activations, data-parallel over replicas."""

    name = "pipeline"

    def __init__(
        self,
        model: nn.Module,
        *,
        stages: int = 2,
        micro_batches: int = 1,
        **common: Any,
    ) -> None:
        require_process_group(self.name)
        world_size, rank = dist.get_world_size(), dist.get_rank()
        if stages < 1 or world_size % stages:
            raise ConfigError(
                f"pipeline stages={stages} must be >= 1 and divide the world size {world_size}; "
                "choose stages among the divisors of the world size"
            )
        if micro_batches < 1:
            raise ConfigError(f"pipeline micro_batches must be >= 1, got {micro_batches}")
        self._full_model = model
        self.stages = stages
        self.micro_batches = micro_batches
        self.stage = rank % stages
        self.replica = rank // stages
        self.replicas = world_size // stages
        stage_module = split_stages(model, stages)[self.stage]
        super().__init__(stage_module, **common)
        self.data_rank = self.replica
        self.data_world_size = self.replicas
        self.is_first = self.stage == 0
        self.is_last = self.stage == stages - 1
        self._stage_group: Any = None
        if self.replicas > 1:
            for s in range(stages):  # every rank creates every group, in the same order
                group = dist.new_group([s + k * stages for k in range(self.replicas)])
                if s == self.stage:
                    self._stage_group = group
            if self.communicate:
                tensors = [*self.model.parameters(), *self.model.buffers()]
                if tensors:
                    broadcast_coalesced(tensors, self.stage, group=self._stage_group)
        self._input_shape: tuple[torch.Size, torch.dtype] | None = None
        params = list(self.model.parameters())
        self.optimizer = self._optimizer(params) if params else None  # a stage may hold no parameters

    def twin(self) -> PipelineStrategy:
        """The no-communication twin on a copy of the whole model; collective (call on every rank)."""
        if not self.is_first and self._input_shape is None:
            raise ConfigError("run one communicating pipeline step before building its twin (shapes unknown)")
        twin = super().twin()
        assert isinstance(twin, PipelineStrategy)
        twin._input_shape = self._input_shape
        return twin

    def _model_for_twin(self) -> nn.Module:
        return self._full_model

    def _micro(self, tensor: torch.Tensor | None, what: str) -> list[torch.Tensor]:
        full = self._to_device(tensor, what)
        if full.shape[0] % self.micro_batches:
            raise ConfigError(
                f"pipeline shard of {full.shape[0]} samples does not split into {self.micro_batches} "
                "equal micro-batches; make the per-replica batch a multiple of micro_batches"
            )
        return list(full.split(full.shape[0] // self.micro_batches))  # type: ignore[no-untyped-call]

    def _step(self, inputs: torch.Tensor | None, targets: torch.Tensor | None, loss_fn: LossFn) -> float:
        micro_inputs = self._micro(inputs, "inputs") if self.is_first else []
        micro_targets = self._micro(targets, "targets") if self.is_last else []
        if self.optimizer is not None:
            self.optimizer.zero_grad(set_to_none=True)
        stage_inputs: list[torch.Tensor] = []
        stage_outputs: list[torch.Tensor] = []
        losses: list[torch.Tensor] = []
        pending: list[Any] = []
        for m in range(self.micro_batches):
            inp = micro_inputs[m] if self.is_first else self._receive_activation(first=m == 0).requires_grad_()
            out = self.model(inp)
            stage_inputs.append(inp)
            stage_outputs.append(out)
            if self.is_last:
                losses.append(loss_fn(out, micro_targets[m]) / self.micro_batches)
            else:
                pending += self._send(out.detach(), self.rank + 1, header=m == 0)
        self._wait(pending)
        for m in reversed(range(self.micro_batches)):
            if self.is_last:
                losses[m].backward()  # type: ignore[no-untyped-call]
            else:
                grad = torch.empty_like(stage_outputs[m])
                if self.communicate:
                    dist.recv(grad, self.rank + 1)
                else:
                    grad.zero_()
                stage_outputs[m].backward(grad)  # type: ignore[no-untyped-call]
            if not self.is_first:
                input_grad = stage_inputs[m].grad
                assert input_grad is not None, "stage input got no gradient"
                pending += self._send(input_grad, self.rank - 1, header=False)
        self._wait(pending)
        self._average_over_replicas()
        if self.optimizer is not None:
            self.optimizer.step()
        if self.is_last:
            return float(sum(float(loss.detach()) for loss in losses))
        return float("nan")

    def _send(self, tensor: torch.Tensor, dst: int, *, header: bool) -> list[Any]:
        if not self.communicate:
            return []
        works = []
        if header:
            works.append(dist.isend(_encode_header(tensor), dst))
        works.append(dist.isend(tensor.contiguous(), dst))
        return works

    def _wait(self, works: list[Any]) -> None:
        for work in works:
            work.wait()
        works.clear()

    def _receive_activation(self, *, first: bool) -> torch.Tensor:
        if self.communicate:
            if first:
                header = torch.empty(_HEADER_LEN, dtype=torch.int64, device=self.device)
                dist.recv(header, self.rank - 1)
                self._input_shape = _decode_header(header)
            assert self._input_shape is not None
            shape, dtype = self._input_shape
            activation = torch.empty(shape, dtype=dtype, device=self.device)
            dist.recv(activation, self.rank - 1)
            return activation
        if self._input_shape is None:
            raise ConfigError("a no-communication pipeline stage needs recorded shapes: build it with twin()")
        shape, dtype = self._input_shape
        return torch.zeros(shape, dtype=dtype, device=self.device)

    def _average_over_replicas(self) -> None:
        if self.replicas == 1:
            return
        params = [p for p in self.model.parameters() if p.requires_grad]
        if not params:
            return
        flat = torch.cat([(p.grad if p.grad is not None else torch.zeros_like(p)).reshape(-1) for p in params])
        if self.communicate:
            dist.all_reduce(flat, group=self._stage_group)
        flat.div_(self.replicas)
        offset = 0
        for p in params:
            p.grad = flat[offset : offset + p.numel()].view_as(p)
            offset += p.numel()


def _encode_header(tensor: torch.Tensor) -> torch.Tensor:
    if tensor.dim() > _HEADER_LEN - 2 or tensor.dtype not in _DTYPES:
        raise ConfigError(
            f"pipeline activations must be floating tensors of at most {_HEADER_LEN - 2} dims, "
            f"got {tensor.dtype} with shape {tuple(tensor.shape)}"
        )
    values = [tensor.dim(), *tensor.shape, _DTYPES.index(tensor.dtype)]
    values += [0] * (_HEADER_LEN - len(values))
    return torch.tensor(values, dtype=torch.int64, device=tensor.device)


def _decode_header(header: torch.Tensor) -> tuple[torch.Size, torch.dtype]:
    values = header.tolist()
    ndim = values[0]
    return torch.Size(values[1 : 1 + ndim]), _DTYPES[values[1 + ndim]]
