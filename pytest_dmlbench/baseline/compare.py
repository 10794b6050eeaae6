"""The verdict rule: a metric regresses only when the change is both large and significant.

For a metric whose better direction is known, a **regression** needs the median to move the bad way by
more than the threshold percent AND a one-sided t-test on the block medians of the two runs' rounds
(:mod:`~pytest_dmlbench.baseline.block_test`; rounds are autocorrelated, blocks count as samples) to give
p < alpha AND, when the baseline was saved at least three times, the current median to lie outside the run-to-run
spread of those saves (a one-sided prediction test, p < alpha; see ``between_runs``). The last condition
is what keeps a noisy shared machine from crying wolf: the first two only see noise within one run.
An **improvement** is the mirror image; anything else is **unchanged**; a metric or case without a
baseline is **new**. Metrics without a direction are informational and get no verdict. NaN samples are
dropped, counted and reported in the verdict's message.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from pytest_dmlbench.baseline.between_runs import MIN_RUNS, BetweenRunTest, between_run_test
from pytest_dmlbench.baseline.block_test import Alternative, BlockTest, block_test
from pytest_dmlbench.baseline.detectable import describe_detectable
from pytest_dmlbench.config import DEFAULT_THRESHOLD_PCT, parse_threshold
from pytest_dmlbench.errors import ConfigError
from pytest_dmlbench.results import CHANGE_KINDS, CaseResult, MetricResult, RunResults, Verdict, VerdictKind
from pytest_dmlbench.stats import median
from pytest_dmlbench.units import format_quantity

DEFAULT_ALPHA = 0.01
# Shown in every verdict message; ``{nodeid}`` is the case, shell-quoted.
REFRESH_COMMAND = "pytest --dmlbench {nodeid} --dmlbench-save"


@dataclass(frozen=True)
class CompareSettings:
    """Run-wide comparison settings (``--dmlbench-threshold``, alpha, the refresh command shown)."""

    threshold_pct: float = DEFAULT_THRESHOLD_PCT
    alpha: float = DEFAULT_ALPHA
    refresh_command: str = REFRESH_COMMAND

    def __post_init__(self) -> None:
        parse_threshold(self.threshold_pct, "--dmlbench-threshold")
        if not (isinstance(self.alpha, float | int) and 0.0 < self.alpha < 1.0):
            raise ConfigError(f"alpha must be a number between 0 and 1 (exclusive), got {self.alpha!r}")

    def threshold_for(self, case: CaseResult) -> float:
        """Per-case threshold (marker ``threshold=``) beats the run default."""
        if case.threshold_pct is None:
            return self.threshold_pct
        return parse_threshold(case.threshold_pct, f"threshold of {case.nodeid}")


def _finite(samples: Sequence[float]) -> tuple[list[float], int]:
    kept = [s for s in samples if not math.isnan(s)]
    return kept, len(samples) - len(kept)


def _ratio(current: float, baseline: float) -> float:
    if baseline == 0.0:
        return 1.0 if current == 0.0 else math.copysign(math.inf, current)
    return current / baseline


def _bad_change_pct(ratio: float, better: str) -> float:
    """How far the median moved the bad way, in percent of the baseline median (negative: the good way)."""
    return (ratio - 1.0) * 100.0 if better == "lower" else (1.0 - ratio) * 100.0


# Figures read once per case rather than timed per round (a peak, a byte count): one reading each side can
# never be tested, so they are judged by the threshold alone (and the saved runs, when there are three).
SINGLE_READING_METRICS = frozenset({"peak_rss_mb", "peak_cuda_mb", "comm_bytes_per_step"})


def _decided(name: str, test: BlockTest, alpha: float) -> bool:
    """Whether a move beyond the threshold counts: significant, or a single-reading figure no test can judge."""
    return test.p_value < alpha or (name in SINGLE_READING_METRICS and not test.testable)


def compare_metric(
    baseline: MetricResult | None,
    current: MetricResult,
    threshold_pct: float,
    alpha: float = DEFAULT_ALPHA,
    refresh_command: str = REFRESH_COMMAND.format(nodeid="..."),
) -> Verdict | None:
    """The verdict on one metric, or None for a metric without a better direction (never compared)."""
    better = current.better if current.better is not None else (baseline.better if baseline else None)
    if better is None:
        return None
    unit = current.unit
    cur, cur_nan = _finite(current.samples)
    cur_median = median(cur) if cur else None
    if baseline is None:
        return Verdict(
            current.name,
            "new",
            None,
            cur_median,
            None,
            threshold_pct,
            None,
            f"{current.name}: no baseline yet (current median {format_quantity(cur_median, unit)})",
        )
    base, base_nan = _finite(baseline.samples)
    dropped = ""
    if cur_nan or base_nan:
        dropped = (
            f"; dropped NaN samples: {base_nan} of {len(baseline.samples)} baseline, "
            f"{cur_nan} of {len(current.samples)} current"
        )
    if not cur or not base:
        side = "current" if not cur else "baseline"
        return Verdict(
            current.name,
            "unchanged",
            median(base) if base else None,
            cur_median,
            None,
            threshold_pct,
            None,
            f"{current.name}: not compared, no finite {side} samples{dropped}",
        )

    base_median = median(base)
    assert cur_median is not None
    ratio = _ratio(cur_median, base_median)
    bad_pct = _bad_change_pct(ratio, better)
    worse: Alternative = "greater" if better == "lower" else "less"
    better_way: Alternative = "less" if worse == "greater" else "greater"
    direction = better_way if -bad_pct > threshold_pct else worse
    test = block_test(cur, base, direction)
    run_medians = [*baseline.history, base_median]
    runs_test = between_run_test(run_medians, cur_median, direction)
    kind: VerdictKind = "unchanged"
    beyond_runs = runs_test is None or runs_test.p_value < alpha
    if abs(bad_pct) > threshold_pct and _decided(current.name, test, alpha) and beyond_runs:
        kind = "regression" if bad_pct > 0 else "improvement"

    medians = (
        f"median {format_quantity(base_median, unit)} -> {format_quantity(cur_median, unit)} "
        f"(ratio {ratio:.3f}, {'+' if bad_pct >= 0 else '-'}{abs(bad_pct):.1f}% "
        f"{'worse' if bad_pct >= 0 else 'better'}; threshold {threshold_pct:g}%)"
    )
    if current.name in SINGLE_READING_METRICS and not test.testable:
        deciders = "the threshold alone decides" if runs_test is None else "the threshold and the saved runs decide"
        evidence = f"{medians}{dropped}; {current.name} is read once per run, so {deciders}"
    else:
        evidence = f"{medians}, {test.describe(alpha)}{dropped}"
    evidence += _runs_description(runs_test, len(run_medians), alpha)
    if current.name not in SINGLE_READING_METRICS:
        spread = runs_test.spread if runs_test is not None and runs_test.spread_pct is not None else None
        evidence += describe_detectable(base, cur, alpha, spread, len(run_medians))
    if kind == "regression":
        message = (
            f"{current.name} regressed: {evidence}.\n"
            f"If this change is intended, refresh the baseline: {refresh_command}"
        )
    elif kind == "improvement":
        message = (
            f"{current.name} improved: {evidence}. If the baseline is stale, refresh it: {refresh_command}"
        )
    else:
        message = f"{current.name} unchanged: {evidence}"
    return Verdict(
        current.name,
        kind,
        base_median,
        cur_median,
        ratio,
        threshold_pct,
        test.p_value,
        message,
        runs_test.p_value if runs_test is not None else None,
        len(run_medians),
    )


def _runs_description(runs_test: BetweenRunTest | None, runs: int, alpha: float) -> str:
    if runs_test is not None:
        return f"; {runs_test.describe(alpha)}"
    return (
        f"; run-to-run noise not measured (the baseline holds {runs} saved run{'s' if runs != 1 else ''}; "
        f"saving it {MIN_RUNS} or more times lets the verdict allow for it)"
    )


def compare_case(
    baseline: CaseResult | None, current: CaseResult, settings: CompareSettings
) -> list[Verdict]:
    """Verdicts for every compared metric of ``current`` (all ``new`` when the case has no baseline)."""
    threshold = settings.threshold_for(current)
    command = settings.refresh_command.format(nodeid=_shell_quote(current.nodeid))
    verdicts = []
    for name, metric in current.metrics.items():
        base_metric = baseline.metrics.get(name) if baseline is not None else None
        verdict = compare_metric(base_metric, metric, threshold, settings.alpha, command)
        if verdict is not None:
            verdicts.append(verdict)
    return verdicts


def _shell_quote(text: str) -> str:
    return text if all(c.isalnum() or c in "/._-:" for c in text) else "'" + text.replace("'", "'\\''") + "'"


def compare_run(baseline: RunResults, current: RunResults, settings: CompareSettings) -> RunResults:
    """A copy of ``current`` whose cases carry verdicts against ``baseline`` (cases matched by node id)."""
    by_nodeid = {case.nodeid: case for case in baseline.cases}
    compared = RunResults.from_dict(current.to_dict())
    for case in compared.cases:
        case.verdicts = compare_case(by_nodeid.get(case.nodeid), case, settings)
    return compared


def failing_verdicts(verdicts: Iterable[Verdict], fail_on_improvement: bool = False) -> list[Verdict]:
    """The verdicts that fail a test item: regressions, and improvements if asked (stale baselines)."""
    failing = CHANGE_KINDS if fail_on_improvement else {"regression"}
    return [v for v in verdicts if v.kind in failing]


def failure_report(verdicts: Sequence[Verdict]) -> str:
    """The text a failing test item shows: one paragraph per failing verdict."""
    return "\n\n".join(v.message for v in verdicts)
