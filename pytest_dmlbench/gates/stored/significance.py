"""The stored-baseline significance test: a one-sided two-sample t-test on block medians of rounds.

Each run's rounds are cut into contiguous blocks (:mod:`~pytest_dmlbench.gates.stored.round_blocks`) and the
test compares the baseline's block medians with the current run's, on a log scale when every median is
positive (a ratio, as the threshold is), else on the metric's own scale. Rounds are never counted as
independent samples: a slow phase of a few seconds moves a whole block, which then counts once. Fewer than
two blocks on a side cannot be tested (no noise estimate); the result says so and can never reach alpha.
Pure functions, no I/O.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from pytest_dmlbench.gates.stored.round_blocks import MIN_BLOCK_ROUNDS, block_medians, on_log_scale
from pytest_dmlbench.results.student_t import one_sided_t_p

Alternative = Literal["greater", "less"]


@dataclass(frozen=True)
class BlockSamples:
    """Block medians of the two runs on the scale the test uses (logs when ``log_scale``)."""

    baseline: list[float]
    current: list[float]
    log_scale: bool

    @property
    def df(self) -> int:
        return len(self.baseline) + len(self.current) - 2

    @property
    def pooled_sd(self) -> float:
        b, c = self.baseline, self.current
        return math.sqrt(((len(b) - 1) * statistics.variance(b) + (len(c) - 1) * statistics.variance(c)) / self.df)

    @property
    def scale(self) -> float:
        """The pooled sd times ``sqrt(1/b + 1/c)``: the standard error of the difference of the means."""
        return self.pooled_sd * math.sqrt(1.0 / len(self.baseline) + 1.0 / len(self.current))


def block_samples(baseline: Sequence[float], current: Sequence[float]) -> BlockSamples | None:
    """Both runs' block medians, or None when either has fewer than two blocks."""
    base, cur = block_medians(baseline), block_medians(current)
    if len(base) < 2 or len(cur) < 2:
        return None
    if on_log_scale(base + cur):
        return BlockSamples([math.log(v) for v in base], [math.log(v) for v in cur], True)
    if not all(math.isfinite(v) for v in base + cur):
        return None
    return BlockSamples(base, cur, False)


@dataclass(frozen=True)
class BlockTest:
    """The outcome: ``p_value`` (one-sided) and what it rested on."""

    p_value: float
    baseline_blocks: int
    current_blocks: int
    baseline_rounds: int
    current_rounds: int
    log_scale: bool

    @property
    def testable(self) -> bool:
        return self.baseline_blocks >= 2 and self.current_blocks >= 2

    def describe(self, alpha: float) -> str:
        counts = (f"{self.baseline_blocks} baseline vs {self.current_blocks} current blocks of rounds "
                  f"({self.baseline_rounds} and {self.current_rounds} rounds)")
        if not self.testable:
            return (f"no test: {counts}, and a test needs two blocks of at least {MIN_BLOCK_ROUNDS} rounds on "
                    f"each side; record more rounds")
        relation = "<" if self.p_value < alpha else ">="
        scale = "log block medians" if self.log_scale else "block medians"
        return f"one-sided t-test on {scale} p={self.p_value:.3g} {relation} alpha {alpha:g} ({counts})"


def block_test(current: Sequence[float], baseline: Sequence[float], alternative: Alternative) -> BlockTest:
    """Is the current run's level ``alternative`` ("greater" or "less") than the baseline's? NaN rounds are
    dropped. Zero spread (every block identical on both sides) makes any move significant."""
    cur = [v for v in current if not math.isnan(v)]
    base = [v for v in baseline if not math.isnan(v)]
    blocks = block_samples(base, cur)
    if blocks is None:
        return BlockTest(1.0, len(block_medians(base)), len(block_medians(cur)), len(base), len(cur),
                         on_log_scale(base + cur))
    move = statistics.fmean(blocks.current) - statistics.fmean(blocks.baseline)
    if alternative == "less":
        move = -move
    p_value = one_sided_t_p(move, blocks.scale, blocks.df)
    return BlockTest(p_value, len(blocks.baseline), len(blocks.current), len(base), len(cur), blocks.log_scale)
