"""Figures derived across cases: a scaling variant's ``speedup`` and ``scaling_efficiency``.

No block records them; they are this case's throughput over its one-rank variant's (judged before it in the
same run), each judged on the two paired estimates together (:func:`difference_of`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from pytest_dmlbench.gates.gate import JudgedItem
from pytest_dmlbench.gates.paired.settling import unsettled_text
from pytest_dmlbench.gates.paired.stage import CaseJudgement, Stage
from pytest_dmlbench.gates.paired.statistics import PairedEstimate, difference_of, in_points, is_inside, judge
from pytest_dmlbench.gates.paired.verdict_writer import VerdictWriter, estimate_text, reconciled_current
from pytest_dmlbench.results import MetricResult, Verdict, VerdictKind
from pytest_dmlbench.results.stats import median

DERIVED_METRICS = frozenset({"speedup", "scaling_efficiency"})
THROUGHPUT = "throughput_samples_per_s"


@dataclass(frozen=True)
class OneRankBase:
    """A one-rank scaling variant's throughput as judged: the base of its family's speedups."""

    estimate: PairedEstimate  # A against B, bad direction
    a: float  # A's block median
    b: float  # B's block median
    budget_spent: bool


def throughput_medians(first: Stage, decisive: Stage) -> tuple[float, float]:
    """A's and B's median throughput over a case's block pairs (the first stage's, and the confirmation's)."""
    a = first.a[THROUGHPUT] + (decisive.a[THROUGHPUT] if decisive is not first else [])
    b = first.b[THROUGHPUT] + (decisive.b[THROUGHPUT] if decisive is not first else [])
    return median(a), median(b)


def missing_reason(name: str, label: str) -> str:
    """Why a figure of the working tree's case has no block value on REF's side."""
    if name in DERIVED_METRICS:
        return (f"{name} is derived from this case's throughput and its one-rank variant's, and the one-rank "
                "variant's throughput was not judged on block pairs before it in this run (deselected, not in "
                f"REF {label}, or on another xdist worker), so no block value exists")
    return f"REF {label}'s case does not record {name}: a figure this change adds, judged from the next REF on"


def derived_verdicts(writer: VerdictWriter, item: JudgedItem, directed: Mapping[str, MetricResult],
                     base: OneRankBase | None, first: Stage, decisive: Stage, threshold: float,
                     judgement: CaseJudgement, figure_alpha: float) -> list[Verdict]:
    """``speedup`` and ``scaling_efficiency`` of a scaling variant, judged at ``figure_alpha`` (the run-level
    share); none when the base (``base``) or this case's throughput is missing."""
    names = [n for n in ("speedup", "scaling_efficiency") if n in directed]
    if base is None or item.scaling_world_size < 2 or not names or not decisive.usable(THROUGHPUT, "ratio"):
        return []
    own = decisive.estimate(THROUGHPUT, "higher", "ratio", figure_alpha)
    if own is None:
        return []
    a_median, b_median = throughput_medians(first, decisive)
    speedup_a, speedup_b = a_median / base.a, b_median / base.b
    est = difference_of(own, base.estimate, figure_alpha)  # one stage, judged at the run-level share
    size = float(item.scaling_world_size)
    verdicts = []
    for name in names:
        metric = directed[name]
        shown = est if name == "speedup" else in_points(est, speedup_b / size)
        a_value, b_value = (speedup_a, speedup_b) if name == "speedup" else (speedup_a / size, speedup_b / size)
        kind: VerdictKind = judge(shown, threshold)
        evidence = (f"{estimate_text(shown, metric.unit)}, from this case's throughput over {decisive.pairs} "
                    f"block pairs and its one-rank variant's over {base.estimate.pairs} (the two intervals "
                    f"combined, Welch), alpha {shown.alpha:g}")
        if kind == "unchanged" and not is_inside(shown, threshold):
            kind = "inconclusive"
            spent = judgement.budget_spent or base.budget_spent
            evidence += "; " + unsettled_text(shown, threshold, "a pair budget was spent" if spent else "")
        p = shown.p_better if kind == "improvement" else shown.p_worse
        a_value = reconciled_current(b_value, shown, metric.better or "higher")
        verdicts.append(writer.write(item, metric, kind, b_value, a_value, threshold, evidence, p_value=p,
                                     detectable_pct=shown.detectable_pct(), runs=decisive.pairs,
                                     cause="unsettled" if kind == "inconclusive" else None,
                                     paired=shown.evidence("first" if decisive is first else "confirmation")))
    return verdicts
