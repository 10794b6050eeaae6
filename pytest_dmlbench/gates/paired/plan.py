"""How the paired gate sizes its blocks and matches A's cases with B's. Pure, no I/O."""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

from pytest_dmlbench.config import DEFAULT_BLOCK_MIN_ROUNDS, DEFAULT_BLOCK_SECONDS
from pytest_dmlbench.results import CaseResult
from pytest_dmlbench.results.stats import median

MIN_ROUND_S = 0.01  # shorter calls are grouped into rounds of about this length
MIN_BLOCK_ROUNDS = DEFAULT_BLOCK_MIN_ROUNDS  # B's first (warm-up) block has at most these rounds
MAX_BLOCK_ROUNDS = 5000


def case_key(nodeid: str, file: Path, tree: Path) -> str:
    """How A's and B's cases are matched: the file relative to its tree's root, then the node id's test
    part (node ids alone depend on each run's rootdir, which pytest derives from its arguments)."""
    try:
        relative = file.resolve().relative_to(tree.resolve()).as_posix()
    except ValueError:
        relative = file.as_posix()
    _, sep, name = nodeid.partition("::")
    return f"{relative}{sep}{name}"


@dataclass(frozen=True)
class BlockPlan:
    """Rounds per block, and at least how many calls each round times (``dmlbench(fn)``/``pedantic``)."""

    rounds: int
    iterations: int = 1

    @classmethod
    def for_step(cls, step_times: list[float], fallback_rounds: int = MIN_BLOCK_ROUNDS,
                 target_s: float = DEFAULT_BLOCK_SECONDS, min_rounds: int = DEFAULT_BLOCK_MIN_ROUNDS) -> BlockPlan:
        """About ``target_s`` of measured time at these steps' median time, and never fewer than ``min_rounds``
        rounds (so a slow step's block lasts ``min_rounds`` steps); calls shorter than :data:`MIN_ROUND_S` are
        grouped, so that the per-round barrier does not dominate the block."""
        step = median(step_times)
        if not (math.isfinite(step) and step > 0):
            return cls(max(min_rounds, min(MAX_BLOCK_ROUNDS, fallback_rounds)))
        iterations = max(1, math.ceil(MIN_ROUND_S / step))
        rounds = math.ceil(target_s / (step * iterations))
        return cls(max(min_rounds, min(MAX_BLOCK_ROUNDS, rounds)), iterations)

    def warm_up(self) -> BlockPlan:
        """B's first block of a case: a few rounds that warm its code paths and tell which metrics it records."""
        return BlockPlan(min(self.rounds, MIN_BLOCK_ROUNDS), self.iterations)


def block_plan(case: CaseResult, target_s: float = DEFAULT_BLOCK_SECONDS,
               min_rounds: int = DEFAULT_BLOCK_MIN_ROUNDS) -> BlockPlan:
    """From the ordinary run: its step time (blocks of about ``target_s``), or its own round count when it
    records no step time; at least ``min_rounds`` rounds either way."""
    step = case.metrics.get("step_time_s")
    counts = [len(m.samples) for m in case.metrics.values() if len(m.samples) > 1]
    return BlockPlan.for_step(step.samples if step is not None else [], max(counts, default=min_rounds),
                              target_s, min_rounds)
