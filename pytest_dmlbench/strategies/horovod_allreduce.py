"""``horovod``: Horovod's averaging all-reduce of every gradient after the backward pass.

Horovod is optional and runs its own runtime beside ``torch.distributed``: build this strategy inside a
process group on ranks where ``horovod.torch.init()`` has already run with the same rank numbering (e.g.
under ``horovodrun`` with the plugin's external-launcher mode). Each gradient goes through
``hvd.allreduce_(grad, op=hvd.Average)`` routed through :mod:`pytest_dmlbench.comm`:
``4 P`` bytes per step for ``P`` float32 parameters; the twin skips them.

UNTESTED: this strategy has never run. Horovod 0.28.1 (its last release) could not be built here
(2026-11-24, Python 3.11, gloo, no MPI): with the CUDA torch wheels the registry offers and ``nvcc`` on
the PATH, CMake stops with ``Could NOT find CUDAToolkit (missing: CUDAToolkit_INCLUDE_DIR CUDA_CUDART)``
(horovod/torch/CMakeLists.txt:23, ``add_cuda``); the README's "Training strategies" section gives every
attempt. Building the strategy raises a :class:`ConfigError` that says so.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch import nn

from pytest_dmlbench import comm
from pytest_dmlbench.errors import ConfigError
from pytest_dmlbench.strategies.base import LossFn, Strategy, register

UNTESTED = ("the 'horovod' strategy is untested: Horovod 0.28.1 could not be built here on 2026-11-24 "
            "(CMake: 'Could NOT find CUDAToolkit (missing: CUDAToolkit_INCLUDE_DIR CUDA_CUDART)' with a CUDA "
            "torch wheel and no CUDA runtime; see the README's \"Training strategies\")")
INSTALL_HINT = ("HOROVOD_WITH_GLOO=1 HOROVOD_WITH_PYTORCH=1 pip install --no-build-isolation horovod "
                f"(builds from source against the installed torch); {UNTESTED}")


def import_horovod_torch() -> Any:
    """``horovod.torch``, initialised, or a :class:`ConfigError` saying what is missing."""
    try:
        import horovod.torch as hvd
    except ModuleNotFoundError as exc:
        if exc.name not in ("horovod", "horovod.torch"):
            raise
        raise ConfigError(f"strategy 'horovod' needs Horovod, which is not installed: {INSTALL_HINT}") from exc
    if not hvd.is_initialized():
        raise ConfigError("strategy 'horovod' needs horovod.torch.init() to have run on every rank "
                          f"(e.g. under horovodrun) before it is built; {UNTESTED}")
    return hvd


@register("horovod")
class HorovodStrategy(Strategy):
    """Gradients averaged with one Horovod all-reduce per parameter tensor (untested: never run here)."""

    name = "horovod"

    def __init__(self, model: nn.Module, *, lr: float, momentum: float = 0.0, communicate: bool = True,
                 device: torch.device | str | None = None) -> None:
        self.hvd = import_horovod_torch()
        super().__init__(model, lr=lr, momentum=momentum, communicate=communicate, device=device)
        if self.hvd.rank() != self.rank or self.hvd.size() != self.world_size:
            raise ConfigError(f"Horovod's rank {self.hvd.rank()} of {self.hvd.size()} differs from the process "
                              f"group's rank {self.rank} of {self.world_size}")
        self._broadcast_parameters_from(0)
        self.optimizer = self._optimizer(self.model.parameters())

    def _allreduce(self, grad: torch.Tensor, name: str) -> Callable[[], Any]:
        return lambda: self.hvd.allreduce_(grad, op=self.hvd.Average, name=name)

    def _step(self, inputs: torch.Tensor | None, targets: torch.Tensor | None, loss_fn: LossFn) -> float:
        x = self._to_device(inputs, "inputs")
        y = self._to_device(targets, "targets")
        self.optimizer.zero_grad(set_to_none=True)
        loss = loss_fn(self.model(x), y)
        loss.backward()
        if self.communicate:
            grads = [p.grad for p in self.model.parameters() if p.grad is not None]
            for index, grad in enumerate(grads):
                comm.issue("all_reduce", comm.nbytes(grad), self._allreduce(grad, f"grad.{index}"))
        self.optimizer.step()
        return float(loss.detach())
