"""Single-reading figures in the stored gate: exact counts compared exactly, memory peaks tested between runs.

An exact count (:data:`~pytest_dmlbench.gates.figures.EXACT_COUNT_METRICS`) reads the same number for the
same work, so its two medians are compared exactly: no test runs and none spends alpha. A memory peak
(:data:`~pytest_dmlbench.gates.figures.MEMORY_PEAK_METRICS`) moves from run to run, and only the saved runs
measure by how much: it is judged by the between-runs prediction test, and is ``unchanged`` only when the
prediction interval lies within the threshold band (:mod:`~pytest_dmlbench.gates.stored.proof`). Pure
functions, no I/O.
"""

from __future__ import annotations

import math
from typing import NamedTuple

from pytest_dmlbench.gates.stored.between_runs import MIN_RUNS, BetweenRunTest
from pytest_dmlbench.gates.stored.detectable import detectable_between_runs_pct
from pytest_dmlbench.gates.stored.proof import between_runs_interval, describe, settle_advice
from pytest_dmlbench.results import InconclusiveCause, VerdictKind
from pytest_dmlbench.results.figures import calls_named


class Judgement(NamedTuple):
    """A single-reading figure's verdict kind and what it rested on."""

    kind: VerdictKind
    evidence: str
    cause: InconclusiveCause | None = None
    detectable_pct: float | None = None


def _changed(bad_pct: float) -> VerdictKind:
    return "regression" if bad_pct > 0 else "improvement"


def _not_finite(what: str, base: float, cur: float) -> Judgement | None:
    if math.isfinite(base) and math.isfinite(cur):
        return None
    side = "both sides" if not (math.isfinite(base) or math.isfinite(cur)) else "one side"
    return Judgement("inconclusive", f"{what} that is not finite on {side}: nothing to compare", "untestable")


def _exact(value: float, unit: str) -> str:
    return f"{value:.0f} {unit}" if value.is_integer() else f"{value:.6g} {unit}"


def exact_count(base: float, cur: float, bad_pct: float, threshold_pct: float, unit: str) -> Judgement:
    """Two medians of an exact count: equal is ``unchanged``; a difference is the change itself, a regression
    or improvement beyond the threshold and ``unchanged`` within it."""
    unusable = _not_finite("an exact count", base, cur)
    if unusable is not None:
        return unusable
    exactly = "an exact count, compared exactly"
    if base == cur:  # any difference would have shown: the smallest change seen is none at all
        return Judgement("unchanged", f"{exactly}: the same {_exact(cur, unit)}; no test ran, no alpha spent",
                         detectable_pct=0.0)
    differs = f"{exactly}: it differs by {abs(bad_pct):.3g} {'pp' if unit == 'fraction' else '%'}"
    if abs(bad_pct) > threshold_pct:
        return Judgement(_changed(bad_pct), f"{differs}, beyond the threshold; no test ran, no alpha spent", None,
                         0.0)
    return Judgement("unchanged", f"{differs} (within the threshold); no test ran, no alpha spent",
                     detectable_pct=0.0)


def call_count(name: str, base: float, cur: float, unit: str) -> Judgement:
    """Two medians of a collective call count (``name``: the total, or one kind's): equal is ``unchanged``, any
    difference a regression."""
    unusable = _not_finite("a call count", base, cur)
    if unusable is not None:
        return unusable
    calls = calls_named(name)
    if base == cur:
        return Judgement("unchanged", f"{calls} counted exactly: the same {_exact(cur, unit)} a step; no test ran, "
                         "no alpha spent", detectable_pct=0.0)
    return Judgement("regression", f"{calls} counted exactly: {_exact(cur, unit)} a step against "
                     f"{_exact(base, unit)}; any change in the {calls} a step makes is a regression, fewer or more (a "
                     "skipped synchronisation or an added one), whatever the threshold; no test ran, no alpha spent",
                     None, 0.0)


def memory_peak(base: float, cur: float, bad_pct: float, threshold_pct: float, unit: str,
                runs_test: BetweenRunTest | None, runs: int, min_runs: int, alpha: float,
                refresh_command: str) -> Judgement:
    """A memory peak against the saved runs: untestable before their spread is known; a regression or
    improvement beyond the threshold with between-runs p < alpha; ``unchanged`` only when the prediction
    interval lies within the threshold band; else unsettled, saying what would settle it."""
    unusable = _not_finite("a memory peak", base, cur)
    if unusable is not None:
        return unusable
    needed = max(min_runs, MIN_RUNS)
    if runs_test is None or runs < needed:
        saves = max(needed - runs, 1)
        return Judgement("inconclusive", (
            f"a memory peak, judged against the saved runs' run-to-run spread, which is not measured: the "
            f"baseline holds {runs} saved run{'s' if runs != 1 else ''} and a memory peak is judged from "
            f"{needed}; save it {saves} more time{'s' if saves > 1 else ''} ({refresh_command})"), "untestable")
    interval = between_runs_interval(runs_test, alpha, cur)
    detectable = (detectable_between_runs_pct(runs_test.spread, runs_test.runs, alpha) if runs_test.log_scale
                  else None)
    tested = f"a memory peak, judged against the saved runs: {runs_test.describe(alpha)}"
    if abs(bad_pct) > threshold_pct and runs_test.p_value < alpha:
        return Judgement(_changed(bad_pct), tested)
    proof = describe([interval], threshold_pct, unit, alpha)
    if interval.within(threshold_pct, unit):
        return Judgement("unchanged", f"{tested}; {proof}", detectable_pct=detectable)
    advice = settle_advice([interval], runs_test, threshold_pct, unit, alpha, refresh_command)
    return Judgement("inconclusive", f"{tested}; {proof}; {advice}", "unsettled", detectable)
