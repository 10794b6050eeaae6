"""``horovod``: Horovod's averaging all-reduce of every gradient after the backward pass.

Horovod is optional and runs its own runtime beside ``torch.distributed``: build this strategy inside a
process group on ranks where ``horovod.torch.init()`` has already run with the same rank numbering (e.g.
under ``horovodrun`` with the plugin's external-launcher mode). Each gradient goes through
``hvd.allreduce_(grad, op=hvd.Average)`` routed through :mod:`pytest_dmlbench.measure.comm`:
``4 P`` bytes per step for ``P`` float32 parameters; the twin skips them.

Run once, on 2026-11-24 at commit 31bde35, not by CI (Horovod is not in the test extra; the launched mode
has changed since, unrun under ``horovodrun``): Horovod 0.28.1, its last release,
does not build as released against torch >= 2.1 (C++14; and with a CUDA torch wheel and ``nvcc`` on the
PATH it asks for a CUDA toolkit even for a CPU build). Built with ``docs/how-to/horovod-0.28.1-cpu-torch2.patch``
against torch 2.3.1, ``bench_cases/test_horovod.py`` passed under ``horovodrun``
(``docs/how-to/torchrun-and-ray.md``, "Horovod"). Without Horovod, building the strategy raises a
:class:`ConfigError` with the install steps.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch import nn

from pytest_dmlbench.errors import ConfigError
from pytest_dmlbench.measure import comm
from pytest_dmlbench.strategies.base import LossFn, Strategy, register

INSTALL_HINT = ("build Horovod 0.28.1 from its sdist with docs/how-to/horovod-0.28.1-cpu-torch2.patch applied, then "
                "HOROVOD_WITH_GLOO=1 HOROVOD_WITH_PYTORCH=1 HOROVOD_WITHOUT_MPI=1 pip install --no-build-isolation . "
                "(docs/how-to/torchrun-and-ray.md, section Horovod, gives the steps; only that build has been run)")


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
                          "(e.g. under horovodrun) before it is built")
    return hvd


@register("horovod")
class HorovodStrategy(Strategy):
    """Gradients averaged with one Horovod all-reduce per parameter tensor."""

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
        loss.backward()  # type: ignore[no-untyped-call]
        if self.communicate:
            grads = [p.grad for p in self.model.parameters() if p.grad is not None]
            for index, grad in enumerate(grads):
                comm.issue("all_reduce", comm.nbytes(grad), self._allreduce(grad, f"grad.{index}"))
        self.optimizer.step()
        return float(loss.detach())
