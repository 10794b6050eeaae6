"""When a tested figure is ``unchanged``: only when its interval proves it, and otherwise what would settle it.

A figure neither found changed nor proven unchanged (its interval at the per-figure level reaches past a
threshold) is ``inconclusive (tested, not settled)``, whatever ended its test: the cap of pairs, the futility
stop, a spent pair budget, or a second stage that did not confirm the first. The verdict names that end, the
interval against the band, and how many pairs at the noise measured would settle it
(:func:`~.statistics.pairs_to_settle`).
"""

from __future__ import annotations

import math

from pytest_dmlbench.gates.paired.statistics import SETTLE_LIMIT, PairedEstimate, pairs_to_settle, threshold_logs


def band_text(est: PairedEstimate, threshold_pct: float) -> str:
    """The band an interval must lie in to prove ``unchanged``, as the estimate states its interval."""
    worse, better = threshold_logs(threshold_pct, est.scale)
    if est.scale == "points":
        return f"{100 * better:+.2f} to {100 * worse:+.2f} pp"
    return f"{math.exp(better):.3f} to {math.exp(worse):.3f}"


def unsettled_text(est: PairedEstimate, threshold_pct: float, ended: str, what: str = "") -> str:
    """Why a figure that was not found changed is not ``unchanged`` either, and what would settle it
    (``what``, or else the pairs :func:`~.statistics.pairs_to_settle` finds); ``ended``: what ended its test,
    in words (empty when nothing but the interval needs saying)."""
    level = f"{100 * (1 - 2 * est.alpha):g}%"
    settle = None if what else pairs_to_settle(est, threshold_pct)
    if settle is not None:
        what = (f"about {settle} block pairs in all at this noise would settle it (--dmlbench-pair-budget, or "
                "the case's pair_budget=, gives it the time)")
    elif not what:
        what = (f"no count of pairs up to {SETTLE_LIMIT} would settle it at this estimate and noise (its estimate "
                "lies within the noise of the threshold): a quieter figure or the case's own threshold= would")
    text = (f"not settled: its {level} interval reaches outside the band {band_text(est, threshold_pct)} that "
            f"proves no change of the threshold's size")
    return f"{text}; {ended}; {what}" if ended else f"{text}; {what}"
