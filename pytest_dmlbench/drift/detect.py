"""A step detector for a series of nightly figures: a piecewise-constant fit with a penalty per step.

The figures are taken on the log scale and oriented so that up is worse. The fit chooses the segmentation
that minimises the sum, over segments, of the absolute deviations from the segment's median, in units of
the noise, plus ``penalty`` for every step (optimal partitioning by dynamic programming, exact; an L1 cost
so that one odd night does not make a step). Every step between fitted segments is reported with its size;
a step is a *regression* when it is worse by at least the threshold and beyond ``z`` standard errors of the
two segments' levels. *Creep* is a run of two or more consecutive worsening steps whose sum is (its steps
are reported too): a slowdown arriving a few percent a night.

The noise is the larger of a floor (what nights of unchanged code vary by on the machine) and the series'
own night-to-night spread (robust estimates from the differences of neighbouring nights, which a step
moves in one place only).
"""

from __future__ import annotations

import bisect
import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from pytest_dmlbench.results import Direction

MEDIAN_SE = math.sqrt(math.pi / 2)  # a median's standard error over a mean's, for normal noise
MAD_TO_SD = 1.4826
TAIL_QUANTILE, TAIL_Z = 0.8, 1.2816  # a normal |x| exceeds 1.2816 sd one time in five
FindingKind = Literal["regression", "creep", "step", "improvement"]


@dataclass(frozen=True)
class DriftSettings:
    """What counts as a finding. ``threshold_pct``: the smallest change (one step, or a creep's sum) that is
    a regression; ``noise_floor``: the smallest per-night noise assumed (sd of log figures);
    ``penalty``: the cost of one more step, in units of the noise (times the log of the series' length);
    ``z``: standard errors a step's size must exceed; ``min_nights``: shorter series are not judged;
    ``min_segment``: nights a level must hold (3: one or two odd nights are never a step; a new level is
    seen on its third night). The defaults were chosen by replay (``studies/replay_drift.py``,
    ``docs/evidence/run-logs.md``)."""

    threshold_pct: float = 10.0
    noise_floor: float = 0.02
    penalty: float = 2.0
    z: float = 2.5
    min_nights: int = 6
    min_segment: int = 3


@dataclass(frozen=True)
class Segment:
    """Nights ``start`` to ``end - 1`` at one level (log scale, up is worse)."""

    start: int
    end: int
    level: float

    @property
    def nights(self) -> int:
        return self.end - self.start


@dataclass(frozen=True)
class Finding:
    """A change between night ``before`` (the last at the old level) and night ``after`` (the first at the
    new one): ``change`` is the new level over the old in the bad direction (1.12: 12 % worse)."""

    kind: FindingKind
    before: int
    after: int
    change: float
    steps: int = 1

    @property
    def regression(self) -> bool:
        return self.kind in ("regression", "creep")

    @property
    def change_pct(self) -> float:
        return 100.0 * (self.change - 1.0)


@dataclass(frozen=True)
class Detection:
    """The fit of one series and what it found."""

    segments: tuple[Segment, ...]
    findings: tuple[Finding, ...]
    noise: float
    judged: bool = True

    @property
    def regressions(self) -> tuple[Finding, ...]:
        return tuple(f for f in self.findings if f.regression)


def oriented_logs(values: Sequence[float], better: Direction) -> list[float]:
    """Log figures with up meaning worse."""
    sign = 1.0 if better == "lower" else -1.0
    return [sign * math.log(v) for v in values]


def _median(sorted_values: Sequence[float]) -> float:
    n = len(sorted_values)
    mid = n // 2
    return sorted_values[mid] if n % 2 else 0.5 * (sorted_values[mid - 1] + sorted_values[mid])


def robust_noise(y: Sequence[float]) -> float:
    """Night-to-night sd from neighbouring differences, 0 under 3 nights: the larger of a MAD estimate (a few
    steps barely move it) and one from the 80th percentile of the absolute differences (heavy tails raise
    it, so odd nights of a noisy figure are not taken for steps)."""
    diffs = sorted(b - a for a, b in itertools.pairwise(y))
    if len(diffs) < 2:
        return 0.0
    centre = _median(diffs)
    mad = MAD_TO_SD * _median(sorted(abs(d - centre) for d in diffs))
    spread = sorted(abs(d) for d in diffs)[int(TAIL_QUANTILE * (len(diffs) - 1))] / TAIL_Z
    return max(mad, spread) / math.sqrt(2.0)


def _l1_costs(y: Sequence[float]) -> list[list[float]]:
    """cost[s][t]: sum of |y_i - median| over nights s..t-1 (t > s): in a sorted window, the upper half's sum
    less the lower half's (the middle value of an odd window counts in neither)."""
    n = len(y)
    cost = [[0.0] * (n + 1) for _ in range(n + 1)]
    for s in range(n):
        window: list[float] = []
        for t in range(s, n):
            bisect.insort(window, y[t])
            half = len(window) // 2
            cost[s][t + 1] = sum(window[len(window) - half:]) - sum(window[:half])
    return cost


def fit_segments(y: Sequence[float], noise: float, penalty: float, min_segment: int = 1) -> list[Segment]:
    """The penalised L1 piecewise-constant fit of ``y`` (exact optimal partitioning), every segment at least
    ``min_segment`` nights long (one segment when the series is shorter than two of them)."""
    n = len(y)
    if n == 0:
        return []
    if n < 2 * min_segment:
        return [Segment(0, n, _median(sorted(y)))]
    cost = _l1_costs(y)
    scale = noise / math.sqrt(2.0)  # Laplace scale with the same sd
    beta = penalty * math.log(max(n, 2))
    best = [0.0] + [math.inf] * n
    start_of = [0] * (n + 1)
    for t in range(1, n + 1):
        for s in range(t - min_segment + 1):
            if s and s < min_segment:
                continue
            total = best[s] + cost[s][t] / scale + (beta if s else 0.0)
            if total < best[t]:
                best[t], start_of[t] = total, s
    bounds: list[tuple[int, int]] = []
    t = n
    while t > 0:
        bounds.append((start_of[t], t))
        t = start_of[t]
    return [Segment(s, e, _median(sorted(y[s:e]))) for s, e in reversed(bounds)]


def _standard_error(noise: float, left: Segment, right: Segment) -> float:
    return MEDIAN_SE * noise * math.sqrt(1.0 / left.nights + 1.0 / right.nights)


def _findings(segments: Sequence[Segment], noise: float, settings: DriftSettings) -> list[Finding]:
    limit = math.log1p(settings.threshold_pct / 100.0)
    found: list[Finding] = []
    run_start: int | None = None  # index of the segment a run of worsening steps started from
    for index in range(1, len(segments) + 1):
        worse = index < len(segments) and segments[index].level > segments[index - 1].level
        if worse and run_start is None:
            run_start = index - 1
        if worse:
            continue
        if run_start is not None:  # the run of worsening steps run_start -> index - 1 ended
            found += _judge_run(segments, run_start, index - 1, noise, settings, limit)
            run_start = None
        if index < len(segments):  # an improving step
            left, right = segments[index - 1], segments[index]
            drop = left.level - right.level
            if drop >= limit and drop >= settings.z * _standard_error(noise, left, right):
                found.append(Finding("improvement", left.end - 1, right.start, math.exp(-drop)))
    return found


def _judge_run(segments: Sequence[Segment], first: int, last: int, noise: float, settings: DriftSettings,
               limit: float) -> list[Finding]:
    """Findings of the worsening steps from segment ``first`` to segment ``last``."""
    found: list[Finding] = []
    for index in range(first + 1, last + 1):
        left, right = segments[index - 1], segments[index]
        rise = right.level - left.level
        significant = rise >= settings.z * _standard_error(noise, left, right)
        if significant:
            kind: FindingKind = "regression" if rise >= limit else "step"
            found.append(Finding(kind, left.end - 1, right.start, math.exp(rise)))
    if last - first >= 2:
        start, end = segments[first], segments[last]
        rise = end.level - start.level
        if rise >= limit and rise >= settings.z * _standard_error(noise, start, end):
            found.append(Finding("creep", start.end - 1, end.start, math.exp(rise), steps=last - first))
    return found


def detect(values: Sequence[float], better: Direction, settings: DriftSettings | None = None) -> Detection:
    """Fit ``values`` (one figure per night, oldest first, all positive) and report its steps."""
    settings = settings or DriftSettings()
    if any(not (v > 0 and math.isfinite(v)) for v in values):
        raise ValueError("every nightly figure must be positive and finite to be judged on the log scale")
    y = oriented_logs(values, better)
    noise = max(settings.noise_floor, robust_noise(y))
    if len(y) < settings.min_nights:
        return Detection((Segment(0, len(y), _median(sorted(y))),) if y else (), (), noise, judged=False)
    segments = fit_segments(y, noise, settings.penalty, settings.min_segment)
    return Detection(tuple(segments), tuple(_findings(segments, noise, settings)), noise)
