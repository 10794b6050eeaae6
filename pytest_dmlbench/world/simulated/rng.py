"""Each simulated rank's own random state (torch's CPU generator, Python's ``random``, numpy's global one).

The three generators are process-wide, so at every switch the leaving rank's states are saved and the
entering rank's restored: rank-seeded code draws what it would draw in a process of its own.
"""

from __future__ import annotations

import random
import sys
from typing import Any

import torch


class RankRandomState:
    """The saved random states of every rank of a world."""

    def __init__(self, world_size: int) -> None:
        self._saved: list[tuple[torch.Tensor, Any, Any] | None] = [None] * world_size

    @staticmethod
    def _capture() -> tuple[torch.Tensor, Any, Any]:
        numpy = sys.modules.get("numpy")
        return (torch.get_rng_state(), random.getstate(),
                numpy.random.get_state(legacy=False) if numpy is not None else None)

    def switch(self, leaving: int, entering: int) -> None:
        """Save ``leaving``'s states and put ``entering``'s in place (a rank not seen yet keeps the current)."""
        self._saved[leaving] = self._capture()
        saved = self._saved[entering]
        if saved is None:
            return
        torch_state, python_state, numpy_state = saved
        torch.set_rng_state(torch_state)
        random.setstate(python_state)
        numpy = sys.modules.get("numpy")
        if numpy is not None and numpy_state is not None:
            numpy.random.set_state(numpy_state)
