"""``deepspeed``: DeepSpeed's engine (``deepspeed.initialize``) with ZeRO stage 0, 1 or 2, on gloo or nccl.

The engine is built around the caller's model with a plain ``torch.optim.SGD`` (``lr``, ``momentum``) in
float32 without loss scaling, so one step equals single-process SGD on the global batch: DeepSpeed averages
gradients over the data-parallel ranks, and each rank's loss is the mean over its shard.

Communication: every operation DeepSpeed issues goes through its backend object (``deepspeed.comm``'s
``cdb``); for the duration of a step its data-moving methods are routed through
:mod:`pytest_dmlbench.measure.comm` (counted, interceptable). Bytes per step for ``P`` float32
parameters on ``n`` ranks (the payload this rank hands over, as everywhere in this package):

- ZeRO 0: gradients all-reduced in buckets: ``all_reduce`` ``4 P``.
- ZeRO 1 and 2: gradient buckets all-reduced, each rank keeping its partition (DeepSpeed's path for this
  configuration), plus the gradient norm its optimizer always computes (one float32), then this rank's
  partition of the updated parameters all-gathered, padded to DeepSpeed's alignment of 2 elements:
  ``all_reduce`` ``4 P + 4`` and ``all_gather`` ``8 ceil(P / 2n)``; a one-rank world counts 0 bytes (nothing
  leaves the process).

The no-communication twin (``communicate=False``) builds the same engine and skips every routed operation
(asynchronous ones return a completed handle). DeepSpeed broadcasts the model once when the engine is
built and never buffers per step (BatchNorm statistics stay per rank, unlike DDP's rule).

DeepSpeed's backend, made once per process by the first engine, would compile (on first use in an
environment: one to two minutes of a core on a 2-core machine) and load a shared-memory operation that only
its ``inference_all_reduce`` uses; this strategy trains, so the engine is built without it
(:func:`without_inference_shm_op`) and ``inference_all_reduce`` falls back to ``torch.distributed``.

DeepSpeed is an optional dependency (``pip install 'pytest-dmlbench[deepspeed]'``), imported when the
strategy is built.
"""

from __future__ import annotations

import contextlib
import importlib
from collections.abc import Callable, Iterator
from typing import Any

import torch
from torch import nn

from pytest_dmlbench.errors import ConfigError
from pytest_dmlbench.measure import comm
from pytest_dmlbench.strategies.base import LossFn, Strategy, register

INSTALL_HINT = "pip install 'pytest-dmlbench[deepspeed]' (or pip install deepspeed)"
ZERO_STAGES = (0, 1, 2)

# deepspeed.comm backend method -> (operation name in comm's accounting, the payload argument's name and its
# position after ``self`` in DeepSpeed's TorchBackend signatures; its methods are wrapped by decorators that
# hide their signatures, and the byte-accounting case cross-checks these against torch.distributed's calls)
ROUTED: dict[str, tuple[str, str, int]] = {
    "all_reduce": ("all_reduce", "tensor", 0),
    "all_reduce_coalesced": ("all_reduce", "tensors", 0),
    "reduce": ("reduce", "tensor", 0),
    "reduce_scatter": ("reduce_scatter", "input_list", 1),
    "reduce_scatter_tensor": ("reduce_scatter", "input_tensor", 1),
    "broadcast": ("broadcast", "tensor", 0),
    "all_gather": ("all_gather", "tensor", 1),
    "all_gather_into_tensor": ("all_gather", "input_tensor", 1),
    "all_gather_base": ("all_gather", "input_tensor", 1),
    "all_gather_coalesced": ("all_gather", "input_tensors", 1),
    "all_to_all_single": ("all_to_all", "input", 1),
    "send": ("send", "tensor", 0),
    "isend": ("send", "tensor", 0),
    "recv": ("recv", "tensor", 0),
    "irecv": ("recv", "tensor", 0),
    "gather": ("gather", "tensor", 0),
    "scatter": ("scatter", "tensor", 0),
}


def import_deepspeed() -> Any:
    """``deepspeed``, or a :class:`ConfigError` saying how to install it."""
    try:
        import deepspeed
    except ModuleNotFoundError as exc:
        if exc.name != "deepspeed":
            raise
        raise ConfigError(f"strategy 'deepspeed' needs DeepSpeed, which is not installed: {INSTALL_HINT}") from exc
    return deepspeed


class _Completed:
    """The handle a skipped asynchronous operation returns."""

    def wait(self, timeout: Any = None) -> bool:
        return True

    def is_completed(self) -> bool:
        return True


def forget_stale_groups() -> None:
    """Drop the process groups DeepSpeed cached at module level whose group no longer exists.

    DeepSpeed clones the world group once per process and keeps it; in a kept rank world the harness
    destroys the sub-groups a case created after that case, so a later case would reach a destroyed group
    ("is not registered"). A dropped cache is rebuilt (a collective ``new_group`` on every rank) on demand.
    """
    import torch.distributed.distributed_c10d as c10d
    from deepspeed.utils import groups

    live = set(c10d._world.pg_map)
    for name, value in list(vars(groups).items()):
        if isinstance(value, c10d.ProcessGroup) and value not in live:
            setattr(groups, name, None)


@contextlib.contextmanager
def without_inference_shm_op() -> Iterator[None]:
    """While DeepSpeed's communication backend is made, build no shared-memory operation for it: DeepSpeed
    builds one (``deepspeed.comm.torch.build_shm_op``) that serves ``inference_all_reduce`` alone, and treats
    ``None`` as an environment without it. A DeepSpeed that lacks the function is left as it is."""
    # by module name: the attribute ``deepspeed.comm.torch`` is the ``torch`` package that module imports
    deepspeed_torch: Any = importlib.import_module("deepspeed.comm.torch")
    original = getattr(deepspeed_torch, "build_shm_op", None)
    if original is None:
        yield
        return
    deepspeed_torch.build_shm_op = lambda: None
    try:
        yield
    finally:
        deepspeed_torch.build_shm_op = original


@contextlib.contextmanager
def routed_deepspeed_comm(backend: Any, *, skip: bool) -> Iterator[None]:
    """Route ``backend``'s data-moving methods through :func:`comm.issue` (or skip them, for the twin)."""
    routed = [method for method in ROUTED if getattr(backend, method, None) is not None]
    for method in routed:
        setattr(backend, method, _router(getattr(backend, method), method, skip))
    try:
        yield
    finally:
        for method in routed:
            delattr(backend, method)  # the instance attribute goes; the class's method shows again


def _router(original: Callable[..., Any], method: str, skip: bool) -> Callable[..., Any]:
    op, name, position = ROUTED[method]

    def routed(*args: Any, **kwargs: Any) -> Any:
        if skip:
            return _Completed()  # a handle for asynchronous callers; synchronous callers ignore it
        payload = kwargs[name] if name in kwargs else args[position] if position < len(args) else None
        if payload is None:
            raise TypeError(f"deepspeed.comm {method} called without its payload {name!r}: {args!r} {kwargs!r}")
        return comm.issue(op, comm.nbytes(payload), lambda: original(*args, **kwargs))

    return routed


@register("deepspeed")
class DeepSpeedStrategy(Strategy):
    """DeepSpeed's engine with ZeRO ``zero_stage`` (0, 1 or 2) and plain SGD; ``config`` adds DeepSpeed
    configuration keys (it may not change the optimizer, precision or ZeRO stage set here)."""

    name = "deepspeed"

    def __init__(
        self,
        model: nn.Module,
        *,
        lr: float,
        momentum: float = 0.0,
        communicate: bool = True,
        device: torch.device | str | None = None,
        zero_stage: int = 0,
        config: dict[str, Any] | None = None,
    ) -> None:
        if zero_stage not in ZERO_STAGES:
            raise ConfigError(f"deepspeed: zero_stage must be one of {ZERO_STAGES}, got {zero_stage!r}")
        extra = dict(config or {})
        fixed = {"optimizer", "fp16", "bf16", "zero_optimization", "gradient_accumulation_steps",
                 "gradient_clipping"} & set(extra)
        if fixed:
            raise ConfigError(f"deepspeed: config may not set {sorted(fixed)}; this strategy fixes them "
                              "(plain SGD in float32 without clipping; zero_stage= chooses the ZeRO stage)")
        deepspeed = import_deepspeed()
        super().__init__(model, lr=lr, momentum=momentum, communicate=communicate, device=device)
        ds_config = {
            "train_micro_batch_size_per_gpu": 1,  # DeepSpeed only checks it; the batch is what step() gets
            "gradient_accumulation_steps": 1,
            "zero_optimization": {"stage": zero_stage},
            "zero_allow_untested_optimizer": True,
            "gradient_clipping": 0.0,  # DeepSpeed clips the gradient norm at 1.0 unless told otherwise
            "steps_per_print": 2**31 - 1,
            "wall_clock_breakdown": False,
            **extra,
        }
        optimizer = self._optimizer(self.model.parameters())
        forget_stale_groups()
        with without_inference_shm_op():
            self.engine, _, _, _ = deepspeed.initialize(model=self.model, optimizer=optimizer, config=ds_config,
                                                        dist_init_required=False)
        self._backend = deepspeed.comm.comm.cdb

    def _step(self, inputs: torch.Tensor | None, targets: torch.Tensor | None, loss_fn: LossFn) -> float:
        x = self._to_device(inputs, "inputs")
        y = self._to_device(targets, "targets")
        with routed_deepspeed_comm(self._backend, skip=not self.communicate):
            loss = loss_fn(self.engine(x), y)
            self.engine.backward(loss)
            self.engine.step()
        return float(loss.detach())
