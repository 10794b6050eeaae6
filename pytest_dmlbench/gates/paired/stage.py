"""One stage of block pairs as the trial keeps it, the figures it tests, and what a case's trial found."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from pytest_dmlbench.gates.figures import is_single_reading
from pytest_dmlbench.gates.paired.canary_adjustment import adjusted_estimate, canary_logs
from pytest_dmlbench.gates.paired.pairs import BlockPair
from pytest_dmlbench.gates.paired.plan import BlockPlan
from pytest_dmlbench.gates.paired.statistics import PairedEstimate, Scale, estimate, pair_values, scale_for
from pytest_dmlbench.results import Direction, Verdict


@dataclass(frozen=True)
class Timed:
    """A figure judged on block pairs: its direction, unit and comparison scale."""

    name: str
    better: Direction
    unit: str

    @property
    def scale(self) -> Scale:
        return scale_for(self.unit)


@dataclass
class Stage:
    """Block medians of one stage, per metric, A and B side by side (one entry per pair), and the canary read
    beside each block (``measure/canary.py``); ``adjust``: estimates are adjusted for the canary."""

    a: dict[str, list[float]] = field(default_factory=dict)
    b: dict[str, list[float]] = field(default_factory=dict)
    a_first: list[bool] = field(default_factory=list)
    canary_a: list[float] = field(default_factory=list)
    canary_b: list[float] = field(default_factory=list)
    fresh_world: list[bool] = field(default_factory=list)  # per pair: both blocks ran on newly started worlds
    adjust: bool = False
    stop: str = ""  # what ended the stage, in words ("" while it runs, or when every figure was clear)
    single: dict[str, tuple[list[float], list[float]]] = field(default_factory=dict)  # A's, B's block readings

    @property
    def pairs(self) -> int:
        return len(self.a_first)

    def take(self, pair: BlockPair, timed: Sequence[Timed]) -> None:
        """Add ``pair``: its order, canary readings, fresh worlds and the block medians of ``timed``."""
        self.a_first.append(pair.a_first)
        self.fresh_world.append(pair.fresh_world)
        self.canary_a.append(pair.canary_a)
        self.canary_b.append(pair.canary_b)
        for t in timed:
            a, b = pair.block_medians(t.name, t.scale)
            self.a.setdefault(t.name, []).append(a)
            self.b.setdefault(t.name, []).append(b)
        names = set(self.single) | {n for side in (pair.a, pair.b) for n in side if is_single_reading(n)}
        for name in sorted(names):
            earlier = [math.nan] * (self.pairs - 1)
            a_side, b_side = self.single.setdefault(name, (list(earlier), list(earlier)))
            a_reading, b_reading = pair.medians(name)
            a_side.append(math.nan if a_reading is None else a_reading)
            b_side.append(math.nan if b_reading is None else b_reading)

    def joined(self, other: Stage) -> Stage:
        """This stage's pairs followed by ``other``'s, as one stage (the evidence of both, pooled)."""
        names = set(self.a) | set(other.a)
        return Stage({n: self.a.get(n, []) + other.a.get(n, []) for n in names},
                     {n: self.b.get(n, []) + other.b.get(n, []) for n in names}, self.a_first + other.a_first,
                     self.canary_a + other.canary_a, self.canary_b + other.canary_b,
                     self.fresh_world + other.fresh_world, self.adjust)

    def usable(self, name: str, scale: Scale) -> bool:
        """Whether every pair of ``name`` has a ratio (positive medians) or a difference (finite ones)."""
        values = self.a.get(name, []) + self.b.get(name, [])
        if not values or not all(math.isfinite(v) for v in values):
            return False
        return scale == "points" or all(v > 0 for v in values)

    def estimate(self, name: str, better: Direction, scale: Scale, alpha: float) -> PairedEstimate | None:
        """The paired estimate of ``name``: adjusted for the canary when ``adjust`` is set and the adjustment
        applies (a ratio, every pair usable, every canary read, enough pairs), else the plain one."""
        values, dropped = pair_values(self.a[name], self.b[name], better, scale)
        if self.adjust and scale == "ratio" and not dropped:
            canary = canary_logs(self.canary_a, self.canary_b)
            adjusted = None if canary is None else adjusted_estimate(values, canary, alpha)
            if adjusted is not None:
                return adjusted
        return estimate(values, alpha, scale)

    def values(self, t: Timed) -> list[float] | None:
        """``t``'s pair values (A against B in the bad direction), or None where a pair has none."""
        if not self.usable(t.name, t.scale):
            return None
        values, dropped = pair_values(self.a[t.name], self.b[t.name], t.better, t.scale)
        return None if dropped else values

    def record(self) -> dict[str, Any]:
        """The stage's raw evidence for the results file: per pair, which side ran first, per metric A's and
        B's block medians (a single-reading figure's block readings too, NaN where a block lacked it), the canary
        beside each side's block (so a decision can be replayed, or re-made with another rule, with or without
        the canary adjustment), and, when worlds were redrawn, which pairs ran on fresh ones."""
        record = {"a_first": list(self.a_first),
                  "a": {**{k: list(v) for k, v in self.a.items()}, **{k: list(a) for k, (a, _) in self.single.items()}},
                  "b": {**{k: list(v) for k, v in self.b.items()}, **{k: list(b) for k, (_, b) in self.single.items()}},
                  "canary": {"a": list(self.canary_a), "b": list(self.canary_b)}}
        if any(self.fresh_world):
            record["fresh_world"] = list(self.fresh_world)
        return record


@dataclass
class CaseJudgement:
    """Everything the gate found for one case (kept for the summary and the results JSON)."""

    nodeid: str
    verdicts: list[Verdict] = field(default_factory=list)
    stages: list[int] = field(default_factory=list)  # pairs per stage
    block_medians: list[dict[str, Any]] = field(default_factory=list)  # per stage: A's and B's, for replay
    plan: BlockPlan | None = None
    notes: list[str] = field(default_factory=list)  # the gate's, in its summary line and extra.paired.notes
    case_notes: list[str] = field(default_factory=list)  # the case's, in its results (extra.notes), as either gate's
    seconds: float = 0.0
    budget_s: float = 0.0
    budget_spent: bool = False
    figure_alpha: float = 0.0  # the level a change of this case is confirmed at (the run-level share)
    profile: dict[str, Any] | None = None  # a confirmed regression's profiled blocks (gates/profile_diff.py)
