"""Timing each training iteration of code the user did not change, through torch's global hooks.

An iteration starts at the first module forward run with gradients enabled after the previous optimizer step,
and ends when an optimizer step returns (``torch.optim.Optimizer``'s global step post-hook). So a script's
start-up (imports, data set, model), its data loading before the forward, and its evaluation (forwards under
``torch.no_grad``, with no optimizer step) are left out, whatever the script's shape: a flat loop or a
``Trainer`` class. Only the hooks' thread is timed, so each simulated rank (a thread) times its own steps.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from pytest_dmlbench.measure.clock import now
from pytest_dmlbench.measure.cpu_time import CpuReader


@dataclass
class StepClock:
    """The wall and CPU seconds of each training iteration run on this thread while :meth:`watching`."""

    wall: list[float] = field(default_factory=list)
    cpu: list[float] = field(default_factory=list)
    cpu_reader: CpuReader = field(default_factory=CpuReader.for_rank)
    _started: tuple[float, float] | None = None
    _thread: int = 0

    @contextmanager
    def watching(self) -> Iterator[StepClock]:
        """Install the hooks for the block (on this thread's iterations), remove them after."""
        from torch.nn.modules.module import register_module_forward_pre_hook
        from torch.optim.optimizer import register_optimizer_step_post_hook

        self._thread = threading.get_ident()
        forward = register_module_forward_pre_hook(self._on_forward)
        step = register_optimizer_step_post_hook(self._on_step)
        try:
            yield self
        finally:
            forward.remove()
            step.remove()
            self._started = None

    def _on_forward(self, module: Any, args: Any) -> None:
        import torch

        if self._started is None and threading.get_ident() == self._thread and torch.is_grad_enabled():
            self._started = (now(), self.cpu_reader.read())

    def _on_step(self, optimizer: Any, args: Any, kwargs: Any) -> None:
        if self._started is None or threading.get_ident() != self._thread:
            return  # a second optimizer's step in the same iteration, or a step with no forward seen
        wall_start, cpu_start = self._started
        self.wall.append(now() - wall_start)
        self.cpu.append(self.cpu_reader.read() - cpu_start)
        self._started = None
