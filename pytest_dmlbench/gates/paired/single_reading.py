"""Single-reading figures (bytes per step, peak memory) on block pairs: compared directly, no paired test.

Each block reads them once more; a change beyond the threshold stands only where every block of one side
lies beyond every block of the other, and that order is unlikely by chance (:func:`apart_or_inconclusive`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

from pytest_dmlbench.gates.figures import SINGLE_READING_METRICS
from pytest_dmlbench.gates.gate import JudgedItem
from pytest_dmlbench.gates.paired.pairs import BlockPair
from pytest_dmlbench.gates.paired.statistics import SingleReading, chance_apart
from pytest_dmlbench.gates.paired.verdict_writer import CHANGED, VerdictWriter
from pytest_dmlbench.results import Direction, InconclusiveCause, MetricResult, Verdict, VerdictKind
from pytest_dmlbench.results.stats import median
from pytest_dmlbench.results.student_t import DEFAULT_ALPHA


def block_readings(pairs: Sequence[BlockPair], name: str) -> tuple[list[float], list[float]]:
    """A's and B's block medians of ``name``, over the blocks that recorded it."""
    a = [median(p.a[name]) for p in pairs if p.a.get(name)]
    b = [median(p.b[name]) for p in pairs if p.b.get(name)]
    return a, b


def single_block_readings(pairs: Sequence[BlockPair]) -> list[tuple[list[float], list[float]]]:
    """Per single-reading figure the blocks recorded, A's and B's block medians (empty where a side lacks it)."""
    names = sorted({n for p in pairs for side in (p.a, p.b) for n in side if n in SINGLE_READING_METRICS})
    return [block_readings(pairs, n) for n in names]


def single_verdicts(writer: VerdictWriter, item: JudgedItem, directed: Mapping[str, MetricResult],
                    pairs: Sequence[BlockPair], threshold: float, alpha: float) -> list[Verdict]:
    """The verdicts on ``directed``'s single-reading figures, from every block of ``pairs``."""
    verdicts = []
    for name, metric in directed.items():
        if name not in SINGLE_READING_METRICS or metric.better is None:
            continue
        a_vals = [v for p in pairs for v in p.a.get(name, ())]
        b_vals = [v for p in pairs for v in p.b.get(name, ())]
        if not a_vals or not b_vals:
            side = "the working tree" if not a_vals else writer.against
            verdicts.append(writer.write(item, metric, "inconclusive", median(b_vals) if b_vals else None,
                                         median(a_vals) if a_vals else None, threshold,
                                         f"no block of {side} recorded it"))
            continue
        reading = SingleReading(median(a_vals), median(b_vals), metric.better, threshold)
        finite = math.isfinite(reading.a) and math.isfinite(reading.b)
        kind: VerdictKind = reading.kind() if finite else "inconclusive"
        evidence = (f"a single-reading figure, compared exactly (median over {len(pairs)} blocks each side), "
                    "no statistical test")
        if not finite:
            sides = "one side" if math.isfinite(reading.a) or math.isfinite(reading.b) else "both sides"
            evidence = (f"a single-reading figure whose median over {len(pairs)} blocks is not finite on "
                        f"{sides}: nothing to compare")
        cause: InconclusiveCause | None = None if finite else "untestable"
        if kind in CHANGED:
            kind, evidence = apart_or_inconclusive(name, metric.better, kind, reading, pairs, alpha)
            cause = "unsettled" if kind == "inconclusive" else None  # the order test ran: readings overlap
        verdicts.append(writer.write(item, metric, kind, reading.b, reading.a, threshold, evidence,
                                     detectable_pct=0.0 if kind == "unchanged" else None, cause=cause))
    return verdicts


def apart_or_inconclusive(name: str, better: Direction, kind: VerdictKind, reading: SingleReading,
                          pairs: Sequence[BlockPair], alpha: float = DEFAULT_ALPHA) -> tuple[VerdictKind, str]:
    """A single-reading change beyond the threshold stands when each side read one value in every one of at
    least two blocks (an exact figure, such as bytes per step), or when every block of one side lies beyond
    every block of the other and the chance of that order with no change (:func:`chance_apart`, on each
    block's median) is at most ``alpha``. When the readings overlap, the figure moves from block to block as
    much as between the sides; when they lie apart over too few blocks, the order says little (one block
    a side: a chance of one half). Both are inconclusive."""
    a, b = block_readings(pairs, name)
    p = chance_apart(a, b, better, a_worse=kind == "regression")
    moved = f"medians {reading.bad_pct:+.1f} % in the bad direction over {len(a)} and {len(b)} blocks"
    exact = len(a) >= 2 and len(b) >= 2 and len(set(a)) == 1 and len(set(b)) == 1
    if p is not None and not exact and p > alpha:
        return "inconclusive", (
            f"a single-reading figure whose {moved}, beyond the threshold, with every block of one side beyond "
            f"every block of the other; but the chance of that order with no change is {p:.2g} over so few "
            f"blocks, above alpha {alpha:g}, so no change can be told from it (more block pairs would)")
    if p is None:
        return "inconclusive", (
            f"a single-reading figure whose {moved}, beyond the threshold, but the blocks' readings overlap "
            f"(working tree {min(a):.6g} to {max(a):.6g}, REF {min(b):.6g} to {max(b):.6g}): it moves from block "
            "to block as much as between the two sides, so no change can be told from that movement")
    side = "above" if (better == "lower") == (kind == "regression") else "below"
    return kind, (f"a single-reading figure, compared exactly ({moved}); every block of the working tree lies "
                  f"{side} every block of REF (chance {p:.2g} with no change, every order of the readings alike)")
