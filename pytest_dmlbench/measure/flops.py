"""FLOPs per step, counted by torch's flop counter in the first warm-up round, so no timed round pays for it.

``torch.utils.flop_counter.FlopCounterMode`` counts the floating-point operations of the operators it knows
(matrix products, convolutions, attention): exact, the same for the same work every time. It does not count
elementwise or memory-bound work (activations, normalisation, optimizer updates, copies): a slowdown there
is left to CPU time and wall time. The count is summed over ranks by the caller.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager


def preload() -> None:
    """Import what the flop counter's first use imports, in a process that forks ranks (the zygote), so that no rank
    imports it on its own: the counter's first count imports ``torch._dynamo`` (about 800 modules; 2.2 s of a core
    on torch 2.14 on the project's 2-core machine, 2026-11-30), and every rank counts FLOPs in its first warm-up
    round. The import starts no thread and touches no device, so forking after it is safe. A torch whose
    ``torch._dynamo`` cannot be imported here (an unsupported Python) is left to the count itself, which reports
    its own error where it runs."""
    import torch.utils.flop_counter

    try:
        import torch._dynamo  # noqa: F401
    except (ImportError, RuntimeError):  # the count in the rank meets the same error and reports it there
        pass


class FlopCount:
    """One step's FLOPs on this rank, counted once in a warm-up round (``enabled`` only when there is one)."""

    def __init__(self, enabled: bool) -> None:
        self.enabled = enabled
        self.counted = False
        self.value = 0.0

    @property
    def pending(self) -> bool:
        """Whether the next step is the one to count."""
        return self.enabled and not self.counted

    @contextmanager
    def counting(self) -> Iterator[None]:
        """Count the operators run inside the block as this rank's FLOPs per step."""
        from torch.utils.flop_counter import FlopCounterMode

        mode = FlopCounterMode(display=False)
        with mode:
            yield
        self.value = float(mode.get_total_flops())
        self.counted = True

    def missing_note(self) -> str:
        return ("flops_per_step is counted in the first warm-up round, and this measurement had none (warmup=0): "
                "not recorded")
