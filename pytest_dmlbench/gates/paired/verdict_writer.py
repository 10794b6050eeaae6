"""How the paired gate words a verdict: against which REF, the command that reproduces it, the evidence."""

from __future__ import annotations

import math
import shlex
from dataclasses import dataclass
from typing import Any

from pytest_dmlbench.gates.gate import JudgedItem
from pytest_dmlbench.gates.paired.statistics import PairedEstimate
from pytest_dmlbench.gates.wording import Decision, detectable_text, word
from pytest_dmlbench.results import Direction, MetricResult, Verdict, VerdictKind

CHANGED = frozenset({"regression", "improvement"})


@dataclass(frozen=True)
class VerdictWriter:
    """Words the verdicts of a run against REF ``label`` (its commit ``commit``, for the reproducing command)."""

    label: str
    commit: str

    @property
    def against(self) -> str:
        return f"REF {self.label}"

    def reproduce(self, item: JudgedItem) -> str:
        return " ".join(["pytest --dmlbench", *item.run_options, "--dmlbench-against", self.commit[:12],
                         shlex.quote(item.nodeid)])

    def write(self, item: JudgedItem, metric: MetricResult, kind: VerdictKind, reference: float | None,
              current: float | None, threshold: float, evidence: str, **more: Any) -> Verdict:
        """``metric``'s verdict, REF's figure ``reference`` against the working tree's ``current``."""
        assert metric.better is not None
        remedy = f"Reproduce: {self.reproduce(item)}" if kind == "regression" else ""
        return word(Decision(metric.name, kind, metric.unit, metric.better, reference, current, threshold,
                             self.against, evidence, remedy=remedy, **more))


def estimate_text(est: PairedEstimate, unit: str) -> str:
    """A paired estimate in words: the ratio (or difference) with its interval and one-sided p-value."""
    low, high = est.ci
    improved = est.mean_log < 0
    p = est.p_better if improved else est.p_worse
    if est.scale == "points":
        return (f"difference {100 * est.mean_log:+.2f} pp [{100 * (1 - 2 * est.alpha):g}% CI "
                f"{100 * est.ci_low_log:+.2f}, {100 * est.ci_high_log:+.2f}] in the bad direction, one-sided "
                f"paired t-test p={p:.3g} (H1: working tree {'better' if improved else 'worse'})")
    return (f"ratio {est.ratio:.3f} [{100 * (1 - 2 * est.alpha):g}% CI {low:.3f}, {high:.3f}] (A/B in the bad "
            f"direction), one-sided paired t-test p={p:.3g} (H1: working tree {'better' if improved else 'worse'})")


def evidence_text(est: PairedEstimate, pairs: int, unit: str) -> str:
    """:func:`estimate_text` over ``pairs`` block pairs, with the per-pair noise."""
    return (f"{estimate_text(est, unit)} over {pairs} block pairs, alpha {est.alpha:g}; per-pair noise "
            f"{detectable_text(est.noise_pct, unit)}")


def reconciled_current(reference: float, est: PairedEstimate, better: Direction) -> float:
    """The working tree's figure as ``est`` states it: REF's ``reference`` moved by the estimated ratio (or
    difference, on the points scale) in the figure's own direction, so that the change a verdict prints, its
    ratio and its interval are one estimate (the two sides' own block medians need not give the same change)."""
    bad = est.mean_log if better == "lower" else -est.mean_log
    if est.scale == "points":
        return reference + bad
    return reference * math.exp(bad)
