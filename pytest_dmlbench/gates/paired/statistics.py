"""The paired decision rule: block pairs of A (working tree) and B (REF), judged on their log ratios.

Pure functions, no I/O, no torch. The unit of evidence is a *block pair*: the median of one block of
rounds of A and the median of the adjacent block of B. Rounds inside a block are autocorrelated on a
shared machine (slow phases last seconds), so they are summarised by their median and never counted as
independent samples. Per pair, ``d = log(A / B)`` for a lower-is-better metric and ``log(B / A)`` for a
higher-is-better one, so ``d > 0`` always means "A is worse". The estimate is ``exp(mean d)`` with a
Student-t confidence interval; the test is a one-sided paired t-test.

A **regression** needs the estimated ratio beyond ``1 + threshold`` AND the one-sided p (A worse) below
alpha; an **improvement** the mirror image (ratio below ``1 - threshold``, p (A better) below alpha).
A result is **clear** when the two-sided ``1 - 2 alpha`` interval (each bound a one-sided ``1 - alpha``
bound) lies wholly beyond a threshold or wholly inside the band between them; while it is not, the gate
adds block pairs (:class:`SequentialRule`).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from pytest_dmlbench.results import Direction, PairedEvidence, PairedScale, PairedStage
from pytest_dmlbench.results.student_t import DEFAULT_ALPHA, POWER, student_t_quantile, student_t_sf

PairedKind = Literal["regression", "improvement", "unchanged"]
Scale = PairedScale
"""How a pair is compared: the log of A over B (times, rates), or A minus B (fractions, in fraction units,
shown as percentage points): a ratio of two fractions near zero says nothing."""


def scale_for(unit: str) -> Scale:
    """Fractions are judged on their difference, everything else on its ratio."""
    return "points" if unit == "fraction" else "ratio"


def block_median(samples: Sequence[float], scale: Scale) -> float:
    """One block's reading of a figure: the median of its samples (NaN dropped; NaN when none). For an even
    count on the ratio scale, the geometric mean of the two middle samples rather than their mean, so that a
    figure computed per sample as a constant over another (a rate from a time: ``64 / t``) has exactly the
    reciprocal block reading, and the two stay one reading (``gates/paired/one_reading.py``); the arithmetic
    middle made them differ by up to 0.1 % in blocks of several calls per round."""
    finite = sorted(float(x) for x in samples if not math.isnan(float(x)))
    if not finite:
        return math.nan
    half = len(finite) // 2
    if len(finite) % 2:
        return finite[half]
    low, high = finite[half - 1], finite[half]
    if scale == "ratio" and low > 0 and high > 0 and math.isfinite(low) and math.isfinite(high):
        return math.sqrt(low * high)
    return (low + high) / 2


def pair_values(a: Sequence[float], b: Sequence[float], better: Direction, scale: Scale) -> tuple[list[float], int]:
    """Per pair, A against B in the bad direction (> 0: A worse) on ``scale``, and how many pairs were
    dropped (no ratio or difference exists)."""
    if scale == "ratio":
        return log_ratios(a, b, better)
    if len(a) != len(b):
        raise ValueError(f"A and B must have the same number of blocks, got {len(a)} and {len(b)}")
    values = [(x - y) if better == "lower" else (y - x) for x, y in zip(a, b, strict=True)
              if math.isfinite(x) and math.isfinite(y)]
    return values, len(a) - len(values)


def log_ratios(a: Sequence[float], b: Sequence[float], better: Direction) -> tuple[list[float], int]:
    """Per pair, ``log`` of A's value over B's in the bad direction (> 0: A worse), and how many pairs
    were dropped because a side was NaN, infinite, zero or negative (no ratio exists)."""
    if len(a) != len(b):
        raise ValueError(f"A and B must have the same number of blocks, got {len(a)} and {len(b)}")
    if better not in ("higher", "lower"):
        raise ValueError(f"better must be 'higher' or 'lower', got {better!r}")
    values: list[float] = []
    for x, y in zip(a, b, strict=True):
        if not (math.isfinite(x) and math.isfinite(y) and x > 0 and y > 0):
            continue
        d = math.log(x / y)
        values.append(d if better == "lower" else -d)
    return values, len(a) - len(values)


@dataclass(frozen=True)
class PairedEstimate:
    """What ``n`` block pairs say about one metric (ratios are A over B in the bad direction)."""

    pairs: int
    mean_log: float
    sd_log: float
    alpha: float
    p_worse: float  # one-sided paired t-test, H1: A worse than B
    p_better: float  # one-sided paired t-test, H1: A better than B
    ci_low_log: float  # one-sided (1 - alpha) lower bound of mean_log
    ci_high_log: float  # one-sided (1 - alpha) upper bound of mean_log
    scale: Scale = "ratio"  # on "points" the *_log fields hold differences (fraction units), not logs
    fitted: int = 0  # parameters fitted besides the mean (1: a canary adjustment), each one degree of freedom

    @property
    def ratio(self) -> float:
        """Estimated factor by which A is worse than B (1.15: 15 % worse; 0.9: 10 % better)."""
        return math.exp(self.mean_log)

    @property
    def ci(self) -> tuple[float, float]:
        """The ``1 - 2 alpha`` confidence interval of the ratio."""
        return math.exp(self.ci_low_log), math.exp(self.ci_high_log)

    @property
    def noise_pct(self) -> float:
        """Per-pair noise: the standard deviation of the log ratio in percent (of the difference in
        percentage points on the "points" scale)."""
        return _as_pct(self.sd_log, self.scale)

    def evidence(self, stage: PairedStage) -> PairedEvidence:
        """This estimate as a verdict records it (``stage``: the stage it comes from)."""
        if self.scale == "points":
            value, (low, high) = self.mean_log, (self.ci_low_log, self.ci_high_log)
        else:
            value, (low, high) = self.ratio, self.ci
        return PairedEvidence(self.scale, value, low, high, 1.0 - 2.0 * self.alpha, self.pairs, self.noise_pct, stage)

    def detectable_pct(self, pairs: int | None = None) -> float:
        """The smallest slowdown (percent; percentage points on the "points" scale) caught with probability
        :data:`POWER` at one-sided ``alpha``, given this per-pair noise and ``pairs`` pairs (default: those
        used)."""
        n = self.pairs if pairs is None else pairs
        df = n - 1 - self.fitted
        if df < 1:
            return math.inf
        t_sum = student_t_quantile(1.0 - self.alpha, df) + student_t_quantile(POWER, df)
        return _as_pct(t_sum * self.sd_log / math.sqrt(n), self.scale)


def _as_pct(value: float, scale: Scale) -> float:
    return 100.0 * (math.exp(value) - 1.0) if scale == "ratio" else 100.0 * value


def estimate(values: Sequence[float], alpha: float = DEFAULT_ALPHA, scale: Scale = "ratio") -> PairedEstimate | None:
    """The paired estimate from per-pair log ratios (see :func:`log_ratios`); None with fewer than 2.

    Zero spread (every pair identical) gives a zero-width interval: p is 0 on the side the pairs lie,
    1 on the other, and 0.5 on both when they are all exactly 0.
    """
    if not 0.0 < alpha < 0.5:
        raise ValueError(f"alpha must lie in (0, 0.5), got {alpha}")
    n = len(values)
    if n < 2:
        return None
    if not all(math.isfinite(v) for v in values):
        raise ValueError("log ratios must be finite (use log_ratios, which drops unusable pairs)")
    mean = statistics.fmean(values)
    sd = statistics.stdev(values)
    se = sd / math.sqrt(n)
    p_worse, p_better, half = t_test(mean, se, n - 1, alpha)
    return PairedEstimate(n, mean, sd, alpha, p_worse, p_better, mean - half, mean + half, scale)


def t_test(mean: float, se: float, df: int, alpha: float) -> tuple[float, float, float]:
    """One-sided Student-t p-values of ``mean`` (standard error ``se``, ``df`` degrees of freedom), A worse
    and A better, and the half-width of the one-sided ``1 - alpha`` bounds. Zero ``se`` gives a zero width:
    p is 0 on the side ``mean`` lies, 1 on the other, and 0.5 on both when it is exactly 0."""
    if se > 0.0:
        t = mean / se
        return student_t_sf(t, df), student_t_sf(-t, df), student_t_quantile(1.0 - alpha, df) * se
    return (0.0 if mean > 0 else (0.5 if mean == 0 else 1.0), 0.0 if mean < 0 else (0.5 if mean == 0 else 1.0),
            0.0)


def difference_of(many: PairedEstimate, one: PairedEstimate, alpha: float | None = None) -> PairedEstimate:
    """The estimate of a figure derived as the quotient of two independently paired figures (a scaling case's
    speedup: its throughput over its one-rank variant's), from the two estimates of those figures in the bad
    direction: the mean log ratio is ``many``'s minus ``one``'s, the standard error adds in quadrature, and the
    degrees of freedom are Welch-Satterthwaite's (rounded down). So a noisy one-rank base widens the interval
    instead of shifting every pair of the larger world alike. ``alpha``: the level of the combined test
    (default the larger of the two estimates')."""
    if many.scale != "ratio" or one.scale != "ratio":
        raise ValueError("difference_of combines estimates on the ratio scale")
    se_many, se_one = many.sd_log / math.sqrt(many.pairs), one.sd_log / math.sqrt(one.pairs)
    mean = many.mean_log - one.mean_log
    se = math.hypot(se_many, se_one)
    alpha = max(many.alpha, one.alpha) if alpha is None else alpha
    if se == 0.0:
        p_worse = 0.0 if mean > 0 else (0.5 if mean == 0 else 1.0)
        p_better = 0.0 if mean < 0 else (0.5 if mean == 0 else 1.0)
        return PairedEstimate(many.pairs, mean, 0.0, alpha, p_worse, p_better, mean, mean)
    parts = [(s**2, n - 1) for s, n in ((se_many, many.pairs), (se_one, one.pairs)) if s > 0.0]
    df = max(1, math.floor(se**4 / sum(v**2 / d for v, d in parts)))
    half = student_t_quantile(1.0 - alpha, df) * se
    t = mean / se
    # sd_log such that sd_log / sqrt(pairs) is the combined standard error (the noise a pair of this figure has)
    return PairedEstimate(many.pairs, mean, se * math.sqrt(many.pairs), alpha, student_t_sf(t, df),
                          student_t_sf(-t, df), mean - half, mean + half)


def in_points(est: PairedEstimate, reference: float) -> PairedEstimate:
    """A ratio-scale estimate of a higher-is-better fraction re-expressed in points of that fraction, given
    B's value ``reference``: A's value is ``reference * exp(-d)``, so A worse by ``reference * (1 - exp(-d))``
    (a monotone map: the test's p-values stay, the interval's bounds map through it)."""
    def points(d: float) -> float:
        return reference * (1.0 - math.exp(-d))

    return PairedEstimate(est.pairs, points(est.mean_log), reference * est.sd_log, est.alpha, est.p_worse,
                          est.p_better, points(est.ci_low_log), points(est.ci_high_log), "points", est.fitted)


def threshold_logs(threshold_pct: float, scale: Scale = "ratio") -> tuple[float, float]:
    """The limits of a threshold on ``scale``: ``log(1 + t)`` for a regression, ``log(1 - t)`` for an
    improvement (minus infinity when the threshold is 100 % or more: nothing improves by all of it); on
    the "points" scale ``t`` and ``-t`` (a threshold of 10 is 10 percentage points)."""
    if not (math.isfinite(threshold_pct) and threshold_pct >= 0):
        raise ValueError(f"threshold must be a finite percentage >= 0, got {threshold_pct}")
    t = threshold_pct / 100.0
    if scale == "points":
        return t, -t
    return math.log1p(t), (math.log1p(-t) if t < 1.0 else -math.inf)


def judge(est: PairedEstimate, threshold_pct: float) -> PairedKind:
    """Magnitude AND significance: beyond the threshold and p below alpha, the matching way."""
    worse, better = threshold_logs(threshold_pct, est.scale)
    if est.mean_log > worse and est.p_worse < est.alpha:
        return "regression"
    if est.mean_log < better and est.p_better < est.alpha:
        return "improvement"
    return "unchanged"


def is_clear(est: PairedEstimate, threshold_pct: float) -> bool:
    """Whether the interval lies wholly beyond one threshold or wholly between the two."""
    return _interval_clear(est.ci_low_log, est.ci_high_log, threshold_pct, est.scale)


SETTLE_LIMIT = 400
"""The most pairs :func:`pairs_to_settle` looks ahead to (at a block of about a second a side, 15 minutes)."""


def is_inside(est: PairedEstimate, threshold_pct: float) -> bool:
    """Whether the interval lies wholly within the band between the two thresholds: the only result that
    proves a figure ``unchanged`` (two one-sided tests, each at the estimate's alpha)."""
    worse, better = threshold_logs(threshold_pct, est.scale)
    return est.ci_high_log <= worse and est.ci_low_log >= better


def pairs_to_settle(est: PairedEstimate, threshold_pct: float, limit: int = SETTLE_LIMIT) -> int | None:
    """The fewest pairs in all after which ``est``'s interval would be clear (:func:`is_clear`) if its mean
    and per-pair noise stayed as they are (:func:`could_clear`); None when no count up to ``limit`` would: a
    mean within the noise of a threshold stays unsettled however many pairs follow."""
    for pairs in range(est.pairs + 1, limit + 1):
        if could_clear(est, threshold_pct, pairs):
            return pairs
    return None


def _interval_clear(low: float, high: float, threshold_pct: float, scale: Scale) -> bool:
    worse, better = threshold_logs(threshold_pct, scale)
    return low > worse or high < better or (high <= worse and low >= better)


def reads_worse(est: PairedEstimate, threshold_pct: float) -> bool:
    """Whether ``est``'s mean lies beyond the regression threshold."""
    return est.mean_log > threshold_logs(threshold_pct, est.scale)[0]


def could_clear(est: PairedEstimate, threshold_pct: float, pairs: int) -> bool:
    """Whether ``est``'s interval would be clear (:func:`is_clear`) after ``pairs`` pairs if its mean and
    per-pair noise stayed as they are: the interval narrows as one over the root of the pairs, and a mean
    that lies within that narrowed half-width of a threshold, or noise whose interval is wider than the band
    between the thresholds while the mean lies inside it, leaves the figure unsettled at the cap whatever
    the pairs between (the test of curtailment on the current trend)."""
    df = pairs - 1 - est.fitted
    if df < 1 or pairs <= est.pairs:
        return is_clear(est, threshold_pct)
    half = student_t_quantile(1.0 - est.alpha, df) * est.sd_log / math.sqrt(pairs)
    return _interval_clear(est.mean_log - half, est.mean_log + half, threshold_pct, est.scale)


@dataclass(frozen=True)
class SequentialRule:
    """How many block pairs one stage uses: at least ``min_pairs``, then more while the result is
    unclear, up to ``max_pairs``. A flagged result is re-measured in a second, independent stage
    (``confirm``) and fails only when that stage flags it too; that stage tests at the run-level share of
    alpha, whose t quantile is about twice the first stage's, so it may run to ``confirm_max_pairs``."""

    min_pairs: int = 4
    max_pairs: int = 24
    confirm: bool = True
    confirm_max_pairs: int = 48
    exact_pairs: int = 2  # a stage whose figures all read exactly alike may end here (:meth:`settled_exactly`)
    futility: bool = False  # end a stage once no unclear figure could be clear by the cap (:func:`could_clear`)

    def __post_init__(self) -> None:
        if not 2 <= self.min_pairs <= min(self.max_pairs, self.confirm_max_pairs):
            raise ValueError(f"need 2 <= min_pairs <= max_pairs and confirm_max_pairs, got {self.min_pairs}, "
                             f"{self.max_pairs}, {self.confirm_max_pairs}")

    def cap(self, confirming: bool = False) -> int:
        """The most pairs a stage takes: ``confirm_max_pairs`` for a confirmation, else ``max_pairs``."""
        return self.confirm_max_pairs if confirming else self.max_pairs

    def wants_more(self, estimates: Sequence[PairedEstimate | None], threshold_pct: float | Sequence[float],
                   pairs: int, confirming: bool = False) -> bool:
        """Whether another pair follows after ``pairs`` pairs whose estimates (one per directed metric,
        None where too few usable pairs) are given, each against its threshold (one for all, or one per
        estimate): while any metric is unclear, up to the stage's cap (:meth:`cap`); with ``futility``, in a
        first stage only while an unclear one could still be clear by the cap."""
        if pairs < self.min_pairs:
            return True
        if pairs >= self.cap(confirming):
            return False
        curtail = self.futility and not confirming
        limits = ([float(threshold_pct)] * len(estimates) if isinstance(threshold_pct, int | float)
                  else list(threshold_pct))
        if len(limits) != len(estimates):
            raise ValueError(f"{len(estimates)} estimates but {len(limits)} thresholds")
        return any(est is None or (not is_clear(est, limit)
                                   and (not curtail or reads_worse(est, limit)
                                        or could_clear(est, limit, self.max_pairs)))
                   for est, limit in zip(estimates, limits, strict=True))

    def settled_exactly(self, tested: Sequence[Sequence[float]],
                        single: Sequence[tuple[Sequence[float], Sequence[float]]], pairs: int) -> bool:
        """Whether a stage of ``pairs`` pairs may end before ``min_pairs``: at least ``exact_pairs`` pairs, every
        tested figure's block medians (``tested``: A's and B's of one figure together) exactly one finite
        value (a deterministic figure, such as a seeded training's accuracy: more pairs cannot move its
        zero difference and zero spread), and every single-reading figure's block readings (``single``: A's,
        B's) overlapping between the sides (more blocks only widen the ranges, so none could set them apart).
        """
        if pairs < self.exact_pairs or pairs >= self.min_pairs or not tested:
            return False
        one_value = all(values and math.isfinite(values[0]) and all(v == values[0] for v in values)
                        for values in tested)
        overlapping = all(a and b and max(a) >= min(b) and max(b) >= min(a) for a, b in single)
        return one_value and overlapping


@dataclass(frozen=True)
class SingleReading:
    """An exact count (bytes per step), A against B directly: the same work reads the same count, so no test
    runs, and a difference is the change itself, judged by the threshold."""

    a: float
    b: float
    better: Direction
    threshold_pct: float

    @property
    def ratio(self) -> float:
        if self.b == 0.0:
            return 1.0 if self.a == 0.0 else math.inf
        return self.a / self.b

    @property
    def bad_pct(self) -> float:
        """How far A is worse than B in percent of B (negative: better)."""
        r = self.ratio
        return 100.0 * (r - 1.0) if self.better == "lower" else 100.0 * (1.0 - r)

    @property
    def changed(self) -> bool:
        return self.a != self.b

    def kind(self) -> PairedKind:
        if not (math.isfinite(self.a) and math.isfinite(self.b)):
            return "unchanged"
        if self.bad_pct > self.threshold_pct:
            return "regression"
        if -self.bad_pct > self.threshold_pct:
            return "improvement"
        return "unchanged"
