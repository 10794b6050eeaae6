"""Summary statistics of raw per-round samples (median, IQR, min, max, mean, stddev, rounds)."""

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
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (pos - lo)


def summarize(samples: Sequence[float]) -> Summary:
    """Summarise raw samples; an empty or all-NaN sequence gives NaN statistics."""
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
        stddev=statistics.stdev(finite) if len(finite) > 1 else 0.0,
        rounds=len(samples),
    )
