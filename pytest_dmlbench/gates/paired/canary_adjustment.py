"""Regression adjustment of block pairs for the machine's phase, read by a canary (as CUPED does).

Per pair, ``d`` is the figure's log ratio of A over B in the bad direction (``statistics.pair_values``) and
``c = log(canary beside A's block / canary beside B's block)`` (``measure/canary.py``): the same fixed work
timed beside each side's block, so ``c`` moves only with the machine. A slow phase that hits one block of a
pair and not the other moves ``d`` and ``c`` together; a change of the code moves ``d`` alone. The adjusted
estimate is the intercept of the least-squares line ``d = mu + theta * c``: the figure's log ratio when both
blocks met the same machine (``c = 0``). Its standard error is the intercept's,
``s * sqrt(1 / n + mean(c)^2 / Sxx)`` with ``n - 2`` degrees of freedom (one more is spent on ``theta``),
so the test stays exact for normal errors whatever ``theta`` turns out to be; when the canary says nothing,
``theta`` is near 0 and the interval is only slightly wider than the plain paired one.

The limit: code that slowed the canary beside its own blocks would be adjusted away with the phases. The
canary runs in A's pytest process between blocks, when the code under test runs nothing; code that leaves
work running after its block (a thread, a worker process) slows the next block of either side as much.

Only figures judged on their ratio are adjusted (times and rates); fractions in points are not, since a
slow machine does not scale them. Below :data:`MIN_ADJUSTED_PAIRS` pairs the lost degree of freedom costs
more than a canary can give back (Student's t quantile at 2 degrees of freedom is 1.5 times that at 3), and
the plain estimate is used.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence

from pytest_dmlbench.gates.paired.statistics import PairedEstimate, t_test

MIN_ADJUSTED_PAIRS = 8
"""Pairs from which the canary adjustment is used (fewer: the plain paired estimate)."""


def canary_logs(a: Sequence[float], b: Sequence[float]) -> list[float] | None:
    """Per pair, ``log`` of the canary beside A's block over the one beside B's; None when any reading is
    missing, zero, negative or not finite (the pairs are then not adjusted)."""
    if len(a) != len(b) or not a:
        return None
    if not all(math.isfinite(x) and x > 0.0 for x in (*a, *b)):
        return None
    return [math.log(x / y) for x, y in zip(a, b, strict=True)]


def adjusted_estimate(values: Sequence[float], canary: Sequence[float], alpha: float) -> PairedEstimate | None:
    """The paired estimate of ``values`` (per-pair log ratios, bad direction) adjusted for ``canary`` (per-pair
    canary log ratios, :func:`canary_logs`); None with fewer than :data:`MIN_ADJUSTED_PAIRS` pairs, pairs
    that do not line up, or canaries that did not vary (nothing to adjust for).

    The result's ``sd_log`` is the per-pair noise the adjusted mean behaves as having (its standard error
    times ``sqrt(n)``), so ``noise_pct`` and ``detectable_pct`` compare directly with the plain estimate's.
    """
    if not 0.0 < alpha < 0.5:
        raise ValueError(f"alpha must lie in (0, 0.5), got {alpha}")
    n = len(values)
    if n != len(canary) or n < MIN_ADJUSTED_PAIRS:
        return None
    if not all(math.isfinite(v) for v in (*values, *canary)):
        raise ValueError("log ratios must be finite (use pair_values and canary_logs, which drop what is not)")
    c_mean, d_mean = statistics.fmean(canary), statistics.fmean(values)
    sxx = sum((c - c_mean) ** 2 for c in canary)
    if sxx <= 0.0:
        return None
    theta = sum((c - c_mean) * (d - d_mean) for c, d in zip(canary, values, strict=True)) / sxx
    intercept = d_mean - theta * c_mean
    residuals = [d - intercept - theta * c for c, d in zip(canary, values, strict=True)]
    df = n - 2
    s = math.sqrt(sum(r * r for r in residuals) / df)
    se = s * math.sqrt(1.0 / n + c_mean**2 / sxx)
    p_worse, p_better, half = t_test(intercept, se, df, alpha)
    return PairedEstimate(n, intercept, se * math.sqrt(n), alpha, p_worse, p_better, intercept - half,
                          intercept + half, "ratio", fitted=1)
