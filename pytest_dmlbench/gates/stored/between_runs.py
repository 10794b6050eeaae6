"""Between-run noise: is the current run's median outside what repeated runs of the baseline produce?

A test on the raw samples of two runs (Mann-Whitney U) only sees the noise *within* each run. On a shared
machine whole runs also differ from each other (CPU placement, neighbours' load, memory layout), and that
between-run noise is invisible to any test on one run's samples. When a baseline was saved several times,
the medians of those saves measure it: the current median is judged against a Student-t prediction
interval for one more run, on a log scale (so a spread of 5 % means the same at 1 ms and at 1 s).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from pytest_dmlbench.results.student_t import one_sided_t_p, student_t_quantile

HISTORY_RUNS = 10
"""How many saved runs a baseline remembers (the newest run's samples plus earlier runs' medians)."""

MIN_RUNS = 3
"""Saved runs needed before between-run noise is estimated (two runs give one degree of freedom)."""


@dataclass(frozen=True)
class BetweenRunTest:
    """The current median against the medians of the baseline's saved runs."""

    runs: int
    p_value: float
    spread_pct: float | None  # run-to-run spread in percent (log scale), None on the linear scale
    spread: float  # standard deviation of the run medians on the scale used (log or the metric's unit)
    change: float = 0.0  # the current median less the saved runs' mean, on the scale used (signed)

    @property
    def log_scale(self) -> bool:
        return self.spread_pct is not None

    def half_width(self, alpha: float) -> float:
        """Half the width of the ``1 - 2 alpha`` prediction interval on :attr:`change`."""
        return prediction_half_width(self.spread, self.runs, alpha)

    def describe(self, alpha: float) -> str:
        relation = "<" if self.p_value < alpha else ">="
        spread = f"{self.spread_pct:.1f}%" if self.spread_pct is not None else f"{self.spread:.3g} (standard deviation)"
        return (
            f"between runs p={self.p_value:.3g} {relation} alpha {alpha:g} "
            f"({self.runs} saved runs of the baseline, run-to-run spread {spread})"
        )


def between_run_test(
    run_medians: Sequence[float], current_median: float, alternative: Literal["greater", "less"]
) -> BetweenRunTest | None:
    """One-sided prediction test of ``current_median`` against the saved runs' medians.

    On a log scale when every median is positive (a spread of 5 % means the same at 1 ms and at 1 s),
    otherwise on the metric's own scale (fractions that can be 0 or negative). None when fewer than
    :data:`MIN_RUNS` finite medians are available (spread unknown). ``alternative="greater"`` asks
    whether the current run is larger than another run of the baseline would plausibly be. Zero spread
    (identical saved medians) makes any move significant.
    """
    medians = [m for m in run_medians if math.isfinite(m)]
    if len(medians) < MIN_RUNS or not math.isfinite(current_median):
        return None
    log_scale = current_median > 0 and all(m > 0 for m in medians)
    values = [math.log(m) for m in medians] if log_scale else medians
    current = math.log(current_median) if log_scale else current_median
    runs = len(values)
    spread = statistics.stdev(values)
    change = current - statistics.fmean(values)
    move = -change if alternative == "less" else change
    p_value = one_sided_t_p(move, spread * math.sqrt(1.0 + 1.0 / runs), runs - 1)
    return BetweenRunTest(runs, p_value, 100.0 * (math.exp(spread) - 1.0) if log_scale else None, spread, change)


def prediction_half_width(spread: float, runs: int, alpha: float) -> float:
    """``t(1 - alpha, runs - 1) * spread * sqrt(1 + 1/runs)``: how far one more run's median may lie from the
    mean of ``runs`` saved ones at this spread, each side of a ``1 - 2 alpha`` prediction interval."""
    return student_t_quantile(1.0 - alpha, runs - 1) * spread * math.sqrt(1.0 + 1.0 / runs)


def half_width_floor(spread: float, alpha: float) -> float:
    """What :func:`prediction_half_width` tends to with ever more saved runs: ``z(1 - alpha) * spread`` (the
    current run is one run, whose own spread no number of saves removes)."""
    return statistics.NormalDist().inv_cdf(1.0 - alpha) * spread
