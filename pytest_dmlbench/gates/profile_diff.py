"""Where a confirmed regression's time went: one profiled block of each side, compared by operator.

After the paired gate confirms a regression it runs one more block of A (the working tree) and one of B
(REF) under the operator profiler (``measure/op_profile.py``) and lists the operators and collectives whose
time grew most from B to A, each with its share of A's profiled block. The list goes under the failing
verdict's message and into the results JSON (``extra.paired.profile``), where the report shows it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pytest_dmlbench.measure.op_profile import BLOCKED_SUFFIX, BlockProfile
from pytest_dmlbench.results.units import format_quantity

TOP = 5
NOISE_SHARE = 0.01  # growth under 1 % of B's block is not named: the profiler's own noise is of that size


@dataclass(frozen=True)
class OpGrowth:
    """One operator or collective: its seconds in A's and B's profiled block, its share of A's block."""

    name: str
    a_s: float
    b_s: float
    share_of_a: float

    @property
    def grew_s(self) -> float:
        return self.a_s - self.b_s

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "a_s": self.a_s, "b_s": self.b_s, "grew_s": self.grew_s,
                "share_of_a": self.share_of_a}


def grown(a: BlockProfile, b: BlockProfile, top: int = TOP) -> list[OpGrowth]:
    """The ``top`` operators and collectives whose time grew most from ``b`` to ``a`` (largest first), each
    growth above :data:`NOISE_SHARE` of ``b``'s block; an operator only one side ran counts 0 on the other."""
    floor = NOISE_SHARE * b.wall_s
    rows = [OpGrowth(name, a.seconds.get(name, 0.0), b.seconds.get(name, 0.0),
                     a.seconds.get(name, 0.0) / a.wall_s if a.wall_s > 0 else 0.0)
            for name in set(a.seconds) | set(b.seconds)]
    rows = [r for r in rows if r.grew_s > floor]
    rows.sort(key=lambda r: (-r.grew_s, r.name))
    return rows[:top]


def growth_text(a: BlockProfile, b: BlockProfile, rows: list[OpGrowth]) -> str:
    """The lines under a failing verdict: the two blocks' profiled time, then each grown row."""
    head = (f"Where the time grew (torch.profiler, one block each side, rank 0): the profiled block took "
            f"{format_quantity(a.wall_s, 's')} here against {format_quantity(b.wall_s, 's')} in REF")
    if not rows:
        return head + "; no operator or collective grew by more than 1 % of REF's block (the time went to " \
                      "Python code between operators, or the change is within the profiler's noise)"
    lines = [head + ":"]
    for r in rows:
        what = "waiting in the collective" if r.name.endswith(BLOCKED_SUFFIX) else "self CPU time"
        lines.append(f"  {r.name}: +{format_quantity(r.grew_s, 's')} ({format_quantity(r.b_s, 's')} -> "
                     f"{format_quantity(r.a_s, 's')}, {100 * r.share_of_a:.0f} % of the block; {what})")
    return "\n".join(lines)
