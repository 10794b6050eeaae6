"""Proof of no change: a stored-gate figure is ``unchanged`` only when its change interval lies within the
threshold band.

Each interval is a ``1 - 2 alpha`` one (two one-sided tests at alpha) on the change, current against the
baseline. On the log scale (every value positive) the band runs from ``log(1 - t)`` to ``log(1 + t)``, on the
figure's own scale from ``-t`` to ``t`` times the reference (``t`` the threshold over 100); a fraction's
threshold is in points, so its band is ``-t`` to ``t`` in fraction units whatever the scale. A figure timed
per round has two intervals, within the run (:mod:`~pytest_dmlbench.gates.stored.significance`) and between
runs (:mod:`~pytest_dmlbench.gates.stored.between_runs`), and both must lie within; a memory peak has the
second only. When one does not, :func:`settle_advice` says what would settle it. Pure functions, no I/O.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

from pytest_dmlbench.gates.stored.between_runs import (
    HISTORY_RUNS,
    BetweenRunTest,
    half_width_floor,
    prediction_half_width,
)
from pytest_dmlbench.gates.stored.significance import BlockSamples
from pytest_dmlbench.results.student_t import student_t_quantile

MOST_RUNS_TRIED = 50
"""The largest number of saved runs :func:`saves_to_settle` considers."""

PAIRED_WAY = "the paired gate (--dmlbench-against REF), measuring both sides in the same minute, can settle it"


@dataclass(frozen=True)
class ChangeInterval:
    """A ``1 - 2 alpha`` interval on the change, current against the baseline: of the log ratio on the log
    scale, of the difference otherwise; ``reference`` is the baseline's level it is taken against."""

    part: str  # "within the run" or "between runs"
    centre: float
    half_width: float
    log_scale: bool
    reference: float

    @property
    def low(self) -> float:
        return self.centre - self.half_width

    @property
    def high(self) -> float:
        return self.centre + self.half_width

    def band(self, threshold_pct: float, unit: str) -> tuple[float, float]:
        """The threshold's lower and upper limits on this interval's scale."""
        return threshold_band(threshold_pct, unit, self.log_scale, self.reference)

    def within(self, threshold_pct: float, unit: str) -> bool:
        """Whether the interval lies wholly within the threshold band (no change of the threshold's size)."""
        low, high = self.band(threshold_pct, unit)
        return low <= self.low and self.high <= high

    def clear(self, threshold_pct: float, unit: str) -> bool:
        """Whether the interval lies wholly within the band or wholly beyond one of its limits."""
        low, high = self.band(threshold_pct, unit)
        return _clear(self.low, self.high, low, high)

    def relation(self, threshold_pct: float, unit: str) -> str:
        """Where the interval lies against the band, in words."""
        low, high = self.band(threshold_pct, unit)
        if low <= self.low and self.high <= high:
            return "inside the threshold band"
        if self.low > high or self.high < low:
            return "beyond the threshold"
        if self.high - self.low > high - low:
            return "wider than the threshold band"
        return "across a threshold"

    def shown(self, value: float, unit: str) -> str:
        """``value`` on this interval's scale in the figure's terms: ``+4.2 %``, or ``+1.3 pp`` for a fraction."""
        return shown_change(value, unit, self.log_scale, self.reference)

    def describe(self, threshold_pct: float, unit: str) -> str:
        return (f"[{self.shown(self.low, unit)}, {self.shown(self.high, unit)}] {self.part}, "
                f"{self.relation(threshold_pct, unit)}")


def threshold_band(threshold_pct: float, unit: str, log_scale: bool, reference: float) -> tuple[float, float]:
    """The limits of the band ``-t`` to ``t`` on an interval's scale: ``log(1 -+ t)`` for a log ratio, ``-+t``
    for a fraction's points (``log(1 -+ t / reference)`` on the log scale), ``-+t * |reference|`` for a
    difference of any other figure (minus infinity where a fall of the threshold's size has no log)."""
    t = threshold_pct / 100.0
    if unit == "fraction":
        if not log_scale:
            return -t, t
        return _log1p(-t / reference), math.log1p(t / reference)
    if log_scale:
        return _log1p(-t), math.log1p(t)
    return -t * abs(reference), t * abs(reference)


def shown_change(value: float, unit: str, log_scale: bool, reference: float) -> str:
    """A change on an interval's scale in the figure's terms (percent, or points for a fraction)."""
    if unit == "fraction":
        points = reference * math.expm1(value) if log_scale else value
        return f"{100.0 * points:+.1f} pp"
    if log_scale:
        return f"{100.0 * math.expm1(value):+.1f} %"
    if reference != 0.0:
        return f"{100.0 * value / abs(reference):+.1f} %"
    return f"{value:+.3g}"


def _log1p(x: float) -> float:
    return math.log1p(x) if x > -1.0 else -math.inf


def _clear(low: float, high: float, band_low: float, band_high: float) -> bool:
    return (band_low <= low and high <= band_high) or low > band_high or high < band_low


def within_run_interval(blocks: BlockSamples, alpha: float, reference: float) -> ChangeInterval:
    """The difference of the mean block medians, current minus baseline, with half-width
    ``t(1 - alpha, df) * blocks.scale``."""
    centre = statistics.fmean(blocks.current) - statistics.fmean(blocks.baseline)
    half = student_t_quantile(1.0 - alpha, blocks.df) * blocks.scale
    return ChangeInterval("within the run", centre, half, blocks.log_scale, reference)


def between_runs_interval(test: BetweenRunTest, alpha: float, current_median: float) -> ChangeInterval:
    """The current median against the saved runs' mean, with the prediction half-width
    ``t(1 - alpha, runs - 1) * spread * sqrt(1 + 1/runs)``."""
    reference = current_median * math.exp(-test.change) if test.log_scale else current_median - test.change
    return ChangeInterval("between runs", test.change, test.half_width(alpha), test.log_scale, reference)


def proven_unchanged(intervals: Sequence[ChangeInterval], threshold_pct: float, unit: str) -> bool:
    """Whether every interval lies within the threshold band (and there is one)."""
    return bool(intervals) and all(i.within(threshold_pct, unit) for i in intervals)


def describe(intervals: Sequence[ChangeInterval], threshold_pct: float, unit: str, alpha: float) -> str:
    """``change intervals (98 %) [-2.1 %, +3.0 %] within the run, inside the threshold band, and ...``."""
    plural = "s" if len(intervals) > 1 else ""
    parts = ", and ".join(i.describe(threshold_pct, unit) for i in intervals)
    return f"change interval{plural} ({100.0 * (1.0 - 2.0 * alpha):g} %) {parts}"


def saves_to_settle(test: BetweenRunTest, alpha: float, band: tuple[float, float],
                    most: int = MOST_RUNS_TRIED) -> int | None:
    """The fewest saved runs in all (more than now, at most ``most``) at which the between-runs interval
    would lie wholly within ``band`` or wholly beyond it, were the change and the spread to stay as measured;
    None when no such number exists."""
    for runs in range(test.runs + 1, most + 1):
        half = prediction_half_width(test.spread, runs, alpha)
        if _clear(test.change - half, test.change + half, *band):
            return runs
    return None


def settle_advice(intervals: Sequence[ChangeInterval], runs_test: BetweenRunTest | None, threshold_pct: float,
                  unit: str, alpha: float, refresh_command: str, rounds: tuple[int, int] = (0, 0)) -> str:
    """What would settle the intervals that are not clear: more rounds for the within-run one; for the
    between-runs one, how many saved runs at the spread measured, or that no number can (then the paired
    gate can)."""
    advice = []
    for interval in intervals:
        if interval.clear(threshold_pct, unit):
            continue
        if interval.part == "within the run":
            advice.append(f"more rounds would narrow the within-run interval ({rounds[0]} baseline and "
                          f"{rounds[1]} current rounds now)")
        elif runs_test is not None:
            advice.append(_saves_advice(interval, runs_test, threshold_pct, unit, alpha, refresh_command))
    return "; ".join(advice)


def _saves_advice(interval: ChangeInterval, test: BetweenRunTest, threshold_pct: float, unit: str,
                  alpha: float, refresh_command: str) -> str:
    runs = saves_to_settle(test, alpha, interval.band(threshold_pct, unit))
    if runs is not None and runs <= HISTORY_RUNS:
        more = runs - test.runs
        return (f"{runs} saved runs would settle it at this spread (save it {more} more "
                f"time{'s' if more != 1 else ''}: {refresh_command})")
    if runs is not None:
        return (f"at this spread it takes {runs} saved runs, more than the {HISTORY_RUNS} a baseline keeps; "
                f"{PAIRED_WAY}")
    floor = interval.shown(half_width_floor(test.spread, alpha), unit).lstrip("+")
    return (f"no number of saved runs can settle it at this spread: the between-runs half-width never falls "
            f"below z({1.0 - alpha:g}) x spread = {floor}; {PAIRED_WAY}")
