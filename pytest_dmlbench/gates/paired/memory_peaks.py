"""Memory peaks on block pairs: tested over worlds, since a peak is steady within a world and offset between.

A rank's peak resident memory is the most it has held since its process started, so every block of one world
reads nearly the same peak, and two worlds running the same code read peaks apart by an offset of their own
(allocator state). Pairs of blocks from the same two worlds therefore say nothing about that offset, and a
test over them alone would call an A/A offset a change. Two ways out:

- **Redrawn worlds** (``--dmlbench-redraw-worlds N``): each pair of freshly started worlds gives one reading per
  side (the median of its blocks), and the paired test runs over those world pairs, whose spread is the
  world offset itself; from :data:`MIN_WORLD_PAIRS` world pairs on.
- **Kept worlds**: the test over block pairs with its interval widened on both sides by the largest offset
  between two sides' worlds measured A/A (:data:`WORLD_OFFSET_PCT`), and its p-value taken against a change
  of that size: a change stands only beyond the threshold and beyond that offset; ``unchanged`` is proven only
  when the widened interval lies within the band, which takes a threshold above the offset.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace

from pytest_dmlbench.gates.paired.pairs import BlockPair
from pytest_dmlbench.gates.paired.statistics import PairedEstimate, estimate, log_ratios, t_test
from pytest_dmlbench.results import Direction
from pytest_dmlbench.results.stats import median

WORLD_OFFSET_PCT = 31.2
"""The largest A/A offset of ``peak_rss_mb`` between the two sides' kept worlds in the recorded nights, either way
on the log scale (a peak 31.2 % above, or one 1/1.312 of, the other): 1,796 readings of 12 whole-suite A/A
nights at world size 4 (``python -m studies.memory_world_offset`` prints them, 2026-12-01; night 13, the first
with tcmalloc and this rule, read at most 5.6 %). On kept worlds a peak's change stands only beyond it; the tail is long
(the 95th percentile of a night is 0.2-1.5 %), so an offset beyond it stays possible, and redrawn worlds are
the test that measures the offset instead of bounding it."""

MIN_WORLD_PAIRS = 3
"""World pairs a test over redrawn worlds needs (two give one degree of freedom and an interval ~32x wide)."""


@dataclass(frozen=True)
class PeakTest:
    """The paired estimate of a memory peak (A against B in the bad direction, on the log scale) and what it
    rested on, in words."""

    estimate: PairedEstimate
    basis: str
    offset_pct: float = 0.0  # the world offset allowed for (kept worlds), 0 over redrawn worlds

    @property
    def settle_text(self) -> str:
        """What would settle a peak this test left unsettled ("" where more pairs would, as for any figure)."""
        if self.offset_pct == 0.0:
            return ""
        return (f"more pairs on the same worlds cannot, for the offset allowed for stays: freshly drawn worlds "
                f"would (--dmlbench-redraw-worlds N, {MIN_WORLD_PAIRS} pairs of worlds at least), or a threshold "
                f"above {self.offset_pct:g} %")

    def detectable_pct(self) -> float:
        """The smallest change this test could detect: the paired test's, beyond the offset allowed for."""
        inner = self.estimate.detectable_pct()
        return 100.0 * ((1.0 + self.offset_pct / 100.0) * (1.0 + inner / 100.0) - 1.0)


def world_groups(pairs: Sequence[BlockPair]) -> list[list[BlockPair]]:
    """``pairs`` cut into runs on one pair of worlds: a pair that ran on fresh worlds starts a new one."""
    groups: list[list[BlockPair]] = []
    for pair in pairs:
        if not groups or pair.fresh_world:
            groups.append([])
        groups[-1].append(pair)
    return [g for g in groups if g]


def side_readings(pairs: Sequence[BlockPair], name: str) -> tuple[list[float], list[float]]:
    """A's and B's block readings of ``name`` (a block's median; pairs where either side lacks it left out)."""
    kept = [(median(p.a[name]), median(p.b[name])) for p in pairs if p.a.get(name) and p.b.get(name)]
    return [a for a, _ in kept], [b for _, b in kept]


def peak_test(pairs: Sequence[BlockPair], name: str, better: Direction, alpha: float) -> PeakTest | None:
    """The test of memory peak ``name`` over ``pairs`` at ``alpha``; None when too few readings exist (fewer
    than two usable world pairs, or block pairs on kept worlds)."""
    worlds = [side_readings(group, name) for group in world_groups(pairs)]
    worlds = [(a, b) for a, b in worlds if a and b]
    if len(worlds) >= MIN_WORLD_PAIRS:
        values, _ = log_ratios([median(a) for a, _ in worlds], [median(b) for _, b in worlds], better)
        est = estimate(values, alpha) if len(values) >= MIN_WORLD_PAIRS else None
        return None if est is None else PeakTest(est, f"over {len(values)} pairs of freshly started worlds")
    a, b = side_readings(pairs, name)
    values, _ = log_ratios(a, b, better)
    est = estimate(values, alpha) if len(values) >= 2 else None
    if est is None:
        return None
    return PeakTest(widened(est), (
        f"over {len(values)} block pairs on {len(worlds)} pair{'s' if len(worlds) != 1 else ''} of kept worlds, "
        f"the interval widened by the largest A/A offset between two sides' worlds measured ({WORLD_OFFSET_PCT:g} %) "
        f"and the test taken against a change of that size (--dmlbench-redraw-worlds tests over fresh worlds)"),
        WORLD_OFFSET_PCT)


def widened(est: PairedEstimate, offset_pct: float = WORLD_OFFSET_PCT) -> PairedEstimate:
    """``est`` with an unknown world offset of up to ``offset_pct`` allowed for: its bounds moved out by that
    offset, and each one-sided p-value that of a change of the offset's size in that direction."""
    offset = math.log1p(offset_pct / 100.0)
    se = est.sd_log / math.sqrt(est.pairs)
    p_worse, _, _ = t_test(est.mean_log - offset, se, est.pairs - 1, est.alpha)
    _, p_better, _ = t_test(est.mean_log + offset, se, est.pairs - 1, est.alpha)
    return replace(est, p_worse=p_worse, p_better=p_better, ci_low_log=est.ci_low_log - offset,
                   ci_high_log=est.ci_high_log + offset)
