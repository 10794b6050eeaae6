"""Where one block's time went on one rank: torch.profiler's operators and the collectives' blocked time.

The paired gate profiles one block of each side after it confirmed a regression (``gates/profile_diff.py``
compares them). Two sources, each named so a reader knows what the seconds are:

- every torch operator's *self* CPU time (``aten::mm``, ``c10d::allreduce_``...) from ``torch.profiler``:
  time in that operator, not in the operators it called; for a collective only the issue, since gloo and
  NCCL run it on their own threads;
- every ``torch.distributed`` collective's *blocked* time (``dist.all_reduce (blocked)``): how long the
  calling thread waited inside the call and its ``wait()``, from the accounting layer (``comm.py``), which
  is where a slower network or a slower peer shows.

The rows overlap (a collective's issue is inside its blocked time), so they are not summed; ``wall_s`` is
the whole profiled span, the base of each row's share. The profiler slows the block down (1.7x on a
small Linear layer's step), the same on both sides, so the comparison stands; a profiled block is never judged.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from pytest_dmlbench.measure.clock import now
from pytest_dmlbench.measure.comm import instrument_collectives

BLOCKED_SUFFIX = " (blocked)"


@dataclass(frozen=True)
class BlockProfile:
    """Seconds and calls per operator or collective over one profiled span, and the span's wall time."""

    wall_s: float
    seconds: dict[str, float] = field(default_factory=dict)
    calls: dict[str, int] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {"wall_s": self.wall_s, "seconds": dict(self.seconds), "calls": dict(self.calls)}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> BlockProfile:
        """The profile a block server sent; ValueError naming the field when it is malformed."""
        try:
            wall = float(data["wall_s"])
            seconds = {str(k): float(v) for k, v in dict(data["seconds"]).items()}
            calls = {str(k): int(v) for k, v in dict(data.get("calls", {})).items()}
        except (KeyError, TypeError, ValueError) as exc:
            raise ValueError(f"not a block profile ({exc!r}): {str(data)[:200]}") from None
        return cls(wall, seconds, calls)


class ProfileSlot:
    """Holds the profile of a :func:`profiled` span once the span has ended."""

    def __init__(self) -> None:
        self.profile: BlockProfile | None = None


@contextmanager
def profiled() -> Iterator[ProfileSlot]:
    """Profile the body of the ``with`` on this thread; the slot holds the :class:`BlockProfile` once the body
    has returned (a body that raises leaves it empty: a failed block is reported, not profiled)."""
    from torch.profiler import ProfilerActivity, profile

    slot = ProfileSlot()
    with instrument_collectives() as counter, profile(activities=[ProfilerActivity.CPU]) as prof:
        begin = now()
        yield slot
        wall = now() - begin
    seconds: dict[str, float] = {}
    calls: dict[str, int] = {}
    for event in prof.key_averages():
        if event.self_cpu_time_total > 0:
            seconds[event.key] = seconds.get(event.key, 0.0) + event.self_cpu_time_total / 1e6
            calls[event.key] = calls.get(event.key, 0) + int(event.count)
    for op, stats in counter.ops.items():
        name = f"dist.{op}{BLOCKED_SUFFIX}"
        seconds[name] = stats.blocked_s
        calls[name] = stats.calls
    slot.profile = BlockProfile(wall, seconds, calls)
