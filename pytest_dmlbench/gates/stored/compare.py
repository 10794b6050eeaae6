"""The stored-baseline verdict rule: a metric regresses only when the change is large, significant, and
beyond what whole runs of the baseline differ by; it is unchanged only when its test proved it.

For a figure timed per round whose better direction is known, a **regression** needs the median to move the
bad way by more than the threshold (percent; percentage points for a fraction) AND a one-sided t-test on
the block medians of the two runs' rounds (:mod:`~pytest_dmlbench.gates.stored.significance`; rounds are
autocorrelated, blocks count as samples) to give p < alpha AND the current median to lie outside the
run-to-run spread of the baseline's saved runs (a one-sided prediction test, p < alpha; see
``between_runs``). The last condition is what keeps a noisy shared machine from crying wolf: the first two
only see noise within one run, and on this kind of machine a baseline saved once gives 11-17 % false alarms.
An **improvement** is the mirror image. Such a figure is **unchanged** only when both ``1 - 2 alpha``
intervals on its change, the within-run one on the block medians and the between-runs prediction one, lie
wholly within the threshold band (:mod:`~pytest_dmlbench.gates.stored.proof`); a figure that is neither is
**inconclusive**, ``unsettled``, and says its interval, the smallest change it could detect and what would
settle it. Until the baseline holds ``min_runs`` saved runs (3 by default), with too few rounds for two
blocks, or with no finite sample, no test runs: **inconclusive**, ``untestable``, saying why. Exact counts
are compared exactly and memory peaks by the between-runs test alone
(:mod:`~pytest_dmlbench.gates.stored.single_reading`). A metric or case without a baseline is **new**.
Metrics without a direction are informational and get no verdict. NaN samples are dropped, counted and
reported.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pytest_dmlbench.config import DEFAULT_CPU_THRESHOLD_PCT, DEFAULT_THRESHOLD_PCT
from pytest_dmlbench.errors import ConfigError
from pytest_dmlbench.gates.figures import MEMORY_PEAK_METRICS, counts_by_kind, is_call_count, is_exact_count
from pytest_dmlbench.gates.stored.between_runs import MIN_RUNS, BetweenRunTest, between_run_test
from pytest_dmlbench.gates.stored.detectable import detectable_pct
from pytest_dmlbench.gates.stored.proof import (
    ChangeInterval,
    between_runs_interval,
    describe,
    proven_unchanged,
    settle_advice,
    within_run_interval,
)
from pytest_dmlbench.gates.stored.significance import Alternative, block_samples, block_test
from pytest_dmlbench.gates.stored.single_reading import call_count, exact_count, memory_peak
from pytest_dmlbench.gates.thresholds import Thresholds
from pytest_dmlbench.gates.wording import Decision, word
from pytest_dmlbench.results import (
    CALLS_TOTAL,
    CaseResult,
    Direction,
    MetricResult,
    RunResults,
    Verdict,
    VerdictKind,
    call_kind,
)
from pytest_dmlbench.results.stats import median
from pytest_dmlbench.results.student_t import DEFAULT_ALPHA

# Shown in every verdict message; ``{nodeid}`` is the case, shell-quoted.
REFRESH_COMMAND = "pytest --dmlbench {nodeid} --dmlbench-save"
AGAINST = "the baseline"


# The run's thresholds when no option sets them (the run's own come from ``DmlbenchConfig``, or the command-line
# tool's --threshold).
DEFAULT_THRESHOLDS = Thresholds(DEFAULT_THRESHOLD_PCT, DEFAULT_CPU_THRESHOLD_PCT, cpu_where_computing=True)


@dataclass(frozen=True)
class CompareSettings:
    """The rule's own parameters: alpha, the refresh command shown, and how many saved runs a figure timed per
    round needs before it is judged. The thresholds are the run's options and are passed per call
    (:class:`~pytest_dmlbench.gates.thresholds.Thresholds`)."""

    alpha: float = DEFAULT_ALPHA
    refresh_command: str = REFRESH_COMMAND
    min_runs: int = MIN_RUNS

    def __post_init__(self) -> None:
        if not (isinstance(self.alpha, float | int) and 0.0 < self.alpha < 1.0):
            raise ConfigError(f"alpha must be a number between 0 and 1 (exclusive), got {self.alpha!r}")
        if not (isinstance(self.min_runs, int) and self.min_runs >= 1):
            raise ConfigError(f"min_runs must be a whole number >= 1, got {self.min_runs!r}")


DEFAULT_SETTINGS = CompareSettings()


def _finite(samples: Sequence[float]) -> tuple[list[float], int]:
    kept = [s for s in samples if not math.isnan(s)]
    return kept, len(samples) - len(kept)


def _bad_change_pct(base: float, cur: float, better: Direction, unit: str) -> float:
    """How far the median moved the bad way: percent of the baseline median, or percentage points for a
    fraction (negative: the good way)."""
    if unit == "fraction":
        return 100.0 * ((cur - base) if better == "lower" else (base - cur))
    if base == 0.0:
        if cur == 0.0:
            return 0.0
        return math.inf if (cur > 0) == (better == "lower") else -math.inf
    ratio = cur / base
    return (ratio - 1.0) * 100.0 if better == "lower" else (1.0 - ratio) * 100.0


def compare_metric(
    baseline: MetricResult | None,
    current: MetricResult,
    threshold_pct: float,
    alpha: float = DEFAULT_ALPHA,
    refresh_command: str = REFRESH_COMMAND.format(nodeid="..."),
    new_reason: str = "no baseline yet",
    min_runs: int = MIN_RUNS,
) -> Verdict | None:
    """The verdict on one metric, or None for a metric without a better direction (never compared).

    A figure timed per round is judged only when the baseline was saved at least ``min_runs`` times (whole
    runs differ on a shared machine by more than blocks inside one run, and only saved runs measure that)
    and both runs hold two blocks of rounds; before that its verdict is ``inconclusive`` and says what to do.
    Then it is ``unchanged`` only when its change intervals lie within the threshold band, and otherwise, short
    of a regression or an improvement, ``inconclusive`` (``unsettled``), saying what would settle it.
    """
    better = current.better if current.better is not None else (baseline.better if baseline else None)
    if better is None:
        return None
    unit = current.unit
    cur, cur_nan = _finite(current.samples)
    cur_median = median(cur) if cur else None

    def decided(kind: VerdictKind, evidence: str, **more: Any) -> Verdict:
        return word(Decision(current.name, kind, unit, better, more.pop("reference", None), cur_median,
                             threshold_pct, AGAINST, evidence, **more))

    if baseline is None:
        return decided("new", new_reason)
    if baseline.unit != unit:
        return decided("inconclusive", f"the unit changed from {baseline.unit!r} (baseline) to {unit!r}: the "
                                       f"figures are not comparable; re-save the baseline ({refresh_command})")
    base, base_nan = _finite(baseline.samples)
    dropped = ""
    if cur_nan or base_nan:
        dropped = (
            f"; dropped NaN samples: {base_nan} of {len(baseline.samples)} baseline, "
            f"{cur_nan} of {len(current.samples)} current"
        )
    base_median = median(base) if base else None
    if not cur or not base or cur_median is None or base_median is None:
        side = "current" if not cur else "baseline"
        return decided("inconclusive", f"no finite {side} samples{dropped}", reference=base_median)

    bad_pct = _bad_change_pct(base_median, cur_median, better, unit)
    worse: Alternative = "greater" if better == "lower" else "less"
    better_way: Alternative = "less" if worse == "greater" else "greater"
    direction = better_way if -bad_pct > threshold_pct else worse
    test = block_test(cur, base, direction)
    run_medians = [*baseline.history, base_median]
    runs_test = between_run_test(run_medians, cur_median, direction)
    more: dict[str, Any] = {
        "reference": base_median, "p_value": test.p_value,
        "between_runs_p": runs_test.p_value if runs_test is not None else None, "runs": len(run_medians),
    }
    if is_exact_count(current.name) or current.name in MEMORY_PEAK_METRICS:
        if is_call_count(current.name):
            single = call_count(current.name, base_median, cur_median, unit)
            more["p_value"] = more["between_runs_p"] = None  # no test ran
        elif is_exact_count(current.name):
            single = exact_count(base_median, cur_median, bad_pct, threshold_pct, unit)
            more["p_value"] = more["between_runs_p"] = None  # no test ran
        else:
            single = memory_peak(base_median, cur_median, bad_pct, threshold_pct, unit, runs_test,
                                 len(run_medians), min_runs, alpha, refresh_command)
            more["p_value"] = None  # the block test does not judge a peak
        return decided(single.kind, f"{single.evidence}{dropped}", remedy=_remedy(single.kind, refresh_command),
                       cause=single.cause, detectable_pct=single.detectable_pct, **more)
    runs_text = _runs_description(runs_test, len(run_medians), alpha)
    if not test.testable:
        return decided("inconclusive", f"{test.describe(alpha)}{dropped}", **more)
    if len(run_medians) < min_runs:
        saves = min_runs - len(run_medians)
        return decided("inconclusive", (
            f"run-to-run noise not measured: the baseline holds {len(run_medians)} saved run"
            f"{'s' if len(run_medians) != 1 else ''} and a figure timed per round is judged from {min_runs}; "
            f"save it {max(saves, 1)} more time{'s' if saves > 1 else ''} ({refresh_command}){dropped}"), **more)
    spread = runs_test.spread if runs_test is not None and runs_test.spread_pct is not None else None
    detectable = detectable_pct(base, cur, alpha, spread, len(run_medians))
    if detectable is not None and unit == "fraction":
        detectable *= base_median  # percent of the baseline's fraction -> percentage points
    beyond_runs = runs_test is None or runs_test.p_value < alpha
    evidence = f"{test.describe(alpha)}{dropped}{runs_text}"
    if abs(bad_pct) > threshold_pct and test.p_value < alpha and beyond_runs:
        kind: VerdictKind = "regression" if bad_pct > 0 else "improvement"
        return decided(kind, evidence, remedy=_remedy(kind, refresh_command), detectable_pct=detectable, **more)
    blocks = block_samples(base, cur)
    if detectable is None or blocks is None:
        return decided("inconclusive", f"{evidence}; no smallest detectable change can be stated "
                                       "(the block medians are not all positive)", **more)
    intervals: list[ChangeInterval] = [within_run_interval(blocks, alpha, base_median)]
    if runs_test is not None:
        intervals.append(between_runs_interval(runs_test, alpha, cur_median))
    evidence += f"; {describe(intervals, threshold_pct, unit, alpha)}"
    if proven_unchanged(intervals, threshold_pct, unit):
        return decided("unchanged", evidence, detectable_pct=detectable, **more)
    advice = settle_advice(intervals, runs_test, threshold_pct, unit, alpha, refresh_command, (len(base), len(cur)))
    return decided("inconclusive", f"{evidence}; {advice}" if advice else evidence, cause="unsettled",
                   detectable_pct=detectable, **more)


def _remedy(kind: VerdictKind, refresh_command: str) -> str:
    if kind == "regression":
        return f"If this change is intended, refresh the baseline: {refresh_command}"
    if kind == "improvement":
        return f"If the baseline is stale, refresh it: {refresh_command}"
    return ""


def _runs_description(runs_test: BetweenRunTest | None, runs: int, alpha: float) -> str:
    if runs_test is not None:
        return f"; {runs_test.describe(alpha)}"
    return f"; run-to-run noise not measured ({runs} saved run{'s' if runs != 1 else ''})"


def compare_case(
    baseline: CaseResult | None, current: CaseResult, settings: CompareSettings = DEFAULT_SETTINGS,
    thresholds: Thresholds = DEFAULT_THRESHOLDS, new_reason: str = "no baseline yet",
) -> list[Verdict]:
    """Verdicts for every compared metric of ``current`` at the run's ``thresholds`` (the case's own beat them);
    all ``new``, saying ``new_reason``, when the case has no baseline."""
    own = thresholds.for_case(current)
    command = settings.refresh_command.format(nodeid=_shell_quote(current.nodeid))
    verdicts = []
    base_metrics = baseline.metrics if baseline is not None else {}
    for name, metric in with_call_kinds(current.metrics, base_metrics).items():
        if not own.judges(name):
            continue
        base_metric = base_metrics.get(name) if baseline is not None else None
        if base_metric is None and baseline is not None and call_kind(name) is not None:
            base_metric = zero_calls(name, base_metrics)
        reason = new_reason if baseline is None else "the baseline does not record this metric"
        verdict = compare_metric(base_metric, metric, own.of(name), settings.alpha, command, reason,
                                 settings.min_runs)
        if verdict is not None:
            verdicts.append(verdict)
    return verdicts


def with_call_kinds(current: Mapping[str, MetricResult],
                    baseline: Mapping[str, MetricResult]) -> dict[str, MetricResult]:
    """``current``'s figures and a zero of each kind of collective only the baseline calls, where the current run
    counted calls by kind (a kind is recorded only where a step calls it)."""
    total = current.get(CALLS_TOTAL)
    if total is None or not counts_by_kind(current, median(total.samples) if total.samples else None):
        return dict(current)
    gone = [n for n in baseline if call_kind(n) is not None and n not in current]
    return {**current, **{n: MetricResult.of(n, [0.0]) for n in gone}}


def zero_calls(name: str, baseline: Mapping[str, MetricResult]) -> MetricResult | None:
    """Zero calls of ``name``'s kind, where the baseline counted calls by kind and did not call it; None where it
    did not count by kind (recorded before calls were, or without counting: the figure is ``new``)."""
    total = baseline.get(CALLS_TOTAL)
    if total is None or not counts_by_kind(baseline, median(total.samples) if total.samples else None):
        return None
    return MetricResult(name, "calls", "lower", [0.0], [0.0] * len(total.history))


def _shell_quote(text: str) -> str:
    return text if all(c.isalnum() or c in "/._-:" for c in text) else "'" + text.replace("'", "'\\''") + "'"


def compare_run(baseline: RunResults, current: RunResults, settings: CompareSettings = DEFAULT_SETTINGS,
                thresholds: Thresholds = DEFAULT_THRESHOLDS) -> RunResults:
    """A copy of ``current`` whose cases carry verdicts against ``baseline`` (cases matched by node id) at the
    run's ``thresholds``."""
    by_nodeid = {case.nodeid: case for case in baseline.cases}
    compared = RunResults.from_dict(current.to_dict())
    for case in compared.cases:
        case.verdicts = compare_case(by_nodeid.get(case.nodeid), case, settings, thresholds)
    return compared

