"""Pure statistics of raw samples: the one median, quantiles and the per-metric summary.

The bottom layer of the package: no I/O, no imports from the package. The results model, the verdict
rules and the benchmark runner all take their median from here.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import asdict, dataclass


@dataclass(frozen=True)
class Summary:
    """Statistics of one metric's raw samples. NaN samples are counted in ``rounds`` but not summarised."""

    median: float
    iqr: float
    min: float
    max: float
    mean: float
    stddev: float
    rounds: int

    def to_dict(self) -> dict[str, float | int]:
        return asdict(self)


def _quantile(ordered: Sequence[float], q: float) -> float:
    """Linear-interpolation quantile (numpy's default) of already sorted values."""
    if len(ordered) == 1:
        return ordered[0]
    pos = q * (len(ordered) - 1)
    lo = math.floor(pos)
    hi = min(lo + 1, len(ordered) - 1)
    fraction = pos - lo
    if fraction == 0 or ordered[hi] == ordered[lo]:
        return ordered[lo]  # exact position: no interpolation (keeps inf samples from turning into NaN)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * fraction


def _stddev(values: Sequence[float]) -> float:
    """Sample standard deviation; NaN when an infinite value makes it meaningless."""
    if len(values) < 2:
        return 0.0
    if not all(math.isfinite(v) for v in values):
        return float("nan")
    return statistics.stdev(values)


def median(samples: Sequence[float]) -> float:
    """Median of the non-NaN samples (mean of the two middle values for an even count); NaN when none."""
    finite = sorted(float(x) for x in samples if not math.isnan(float(x)))
    return _quantile(finite, 0.5) if finite else float("nan")


def summarize(samples: Sequence[float]) -> Summary:
    """Summarise raw samples; an empty or all-NaN sequence gives NaN statistics (inf samples are kept)."""
    finite = sorted(float(x) for x in samples if not math.isnan(float(x)))
    if not finite:
        nan = float("nan")
        return Summary(nan, nan, nan, nan, nan, nan, len(samples))
    return Summary(
        median=_quantile(finite, 0.5),
        iqr=_quantile(finite, 0.75) - _quantile(finite, 0.25),
        min=finite[0],
        max=finite[-1],
        mean=statistics.fmean(finite),
        stddev=_stddev(finite),
        rounds=len(samples),
    )


def median_interval(samples: Sequence[float], confidence: float = 0.95) -> tuple[float, float]:
    """Distribution-free confidence interval of the median: the order statistics ``x(k)`` and ``x(n+1-k)``.

    ``k`` is the largest rank with ``P(Binomial(n, 1/2) < k) <= (1 - confidence) / 2``, so the interval
    covers the median with at least ``confidence``, whatever the distribution. NaN samples are dropped;
    ``(-inf, inf)`` when there are too few samples for that confidence (fewer than 6 at 95 %).
    """
    ordered = sorted(float(x) for x in samples if not math.isnan(float(x)))
    n, tail = len(ordered), (1 - confidence) / 2
    k, below = 0, 0.0
    while k < n and below + math.comb(n, k) / 2**n <= tail:
        below += math.comb(n, k) / 2**n
        k += 1
    if k == 0:
        return -math.inf, math.inf
    return ordered[k - 1], ordered[n - k]
