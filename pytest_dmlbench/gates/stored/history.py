"""Carrying a baseline's run history forward when a case is saved again.

Every save adds the previous save's median to the metric's ``history`` (the newest :data:`HISTORY_RUNS`
runs are kept), so repeated saves measure the machine's run-to-run noise. Once that noise is known (at
least :data:`MIN_RUNS` runs), a save whose figure is a regression or an improvement by the full rule (an
intended change being accepted) starts the history afresh, so medians of old code do not widen the noise
estimate of new code. Before that, saves always append: on a noisy machine two single runs often differ
"significantly", and restarting on every such pair would never let a history form. An inconclusive
comparison (a figure too short to test) appends too: nothing was accepted.
"""

from __future__ import annotations

import math

from pytest_dmlbench.gates.stored.between_runs import HISTORY_RUNS
from pytest_dmlbench.gates.stored.compare import compare_metric
from pytest_dmlbench.gates.thresholds import Thresholds
from pytest_dmlbench.results import CHANGE_KINDS, CaseResult, MetricResult


def carried_history(previous: MetricResult | None, current: MetricResult, threshold_pct: float,
                    alpha: float) -> list[float]:
    """The history ``current`` should be saved with, given the stored ``previous`` figure (or None)."""
    if previous is None:
        return []
    previous_median = previous.stats.median  # NaN samples left out; NaN when there is no finite sample
    if math.isnan(previous_median):
        return []
    verdict = compare_metric(previous, current, threshold_pct, alpha)
    if verdict is not None and verdict.between_runs_p is not None and verdict.kind in CHANGE_KINDS:
        return []  # a change beyond the known run-to-run noise was accepted: its history starts here
    return [*previous.history, previous_median][-(HISTORY_RUNS - 1):]


def with_history(current: CaseResult, previous: CaseResult | None, thresholds: Thresholds,
                 alpha: float) -> CaseResult:
    """A copy of ``current`` whose metrics carry the run history of the stored ``previous`` case, judged at the
    run's ``thresholds`` (the case's own beat them)."""
    saved = CaseResult.from_dict(current.to_dict())
    own = thresholds.for_case(current)
    for name, metric in saved.metrics.items():
        stored = previous.metrics.get(name) if previous is not None else None
        metric.history = carried_history(stored, metric, own.of(name), alpha)
    return saved
