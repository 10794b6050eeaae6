"""One wording for every verdict: decided first (numbers and kind), then worded here, for both gates.

Each change and each proof of none names the kind of figure that read it and what that kind cannot see (``seen by
CPU time, which misses waiting: ...``: :mod:`pytest_dmlbench.results.figures`), so a reader knows what a verdict can
stand for.

Sign convention, the same in the message, the table, the JSON, the job summary and the report: a change
is stated as a magnitude and a word for its direction, never as a signed percentage a reader must decode.
Times and rates say ``slower``/``faster``, sizes ``larger``/``smaller``, other figures ``worse``/``better``:
``+18.8 % slower`` is a step time 1.188x as long, or a throughput 1/1.188 of what it was; from 2x on the
factor is given instead (``x255 faster``). Fractions change by percentage points: ``+3.1 pp worse``.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from pytest_dmlbench.config import InconclusiveScope
from pytest_dmlbench.results import Direction, InconclusiveCause, PairedEvidence, Verdict, VerdictKind
from pytest_dmlbench.results.figures import seen_by
from pytest_dmlbench.results.units import format_quantity

_LEADS: dict[str, str] = {
    "regression": "regressed",
    "improvement": "improved",
    "unchanged": "unchanged",
    "inconclusive": "inconclusive (not tested)",
    "new": "new",
}
_UNSETTLED_LEAD = "inconclusive (tested, not settled)"


def direction_words(unit: str, better: Direction) -> tuple[str, str]:
    """The words for a worse and a better change of a figure with this unit."""
    if unit == "s" or unit.endswith("/s"):
        return "slower", "faster"
    if unit in ("bytes", "MB", "B"):
        return ("larger", "smaller") if better == "lower" else ("smaller", "larger")
    return "worse", "better"


def bad_factor(reference: float, current: float, better: Direction) -> float:
    """How many times worse ``current`` is than ``reference`` (> 1 worse, < 1 better); positive inputs."""
    return current / reference if better == "lower" else reference / current


def change_text(reference: float | None, current: float | None, better: Direction, unit: str) -> str:
    """``+18.8 % slower``, ``x255 faster``, ``+3.1 pp worse``, ``no change``; empty when no change can be
    stated (a side missing or not finite)."""
    if reference is None or current is None or not (math.isfinite(reference) and math.isfinite(current)):
        return ""
    worse_word, better_word = direction_words(unit, better)
    if unit == "fraction":
        bad_points = 100.0 * ((current - reference) if better == "lower" else (reference - current))
        if bad_points == 0.0:
            return "no change"
        return f"+{abs(bad_points):.1f} pp {worse_word if bad_points > 0 else better_word}"
    if current == reference:
        return "no change"
    if reference <= 0.0 or current <= 0.0:
        worse = (current > reference) == (better == "lower")
        return f"{worse_word if worse else better_word} (from {reference:g} to {current:g})"
    factor = bad_factor(reference, current, better)
    word = worse_word if factor > 1.0 else better_word
    size = factor if factor > 1.0 else 1.0 / factor
    if size >= 2.0:
        return f"x{size:.3g} {word}"
    return f"+{100.0 * (size - 1.0):.1f} % {word}"


def detectable_text(pct: float, unit: str) -> str:
    """The smallest change a test could have detected, in the figure's terms."""
    if not math.isfinite(pct):
        return "any change (too few readings)"
    return f"{pct:.1f} pp" if unit == "fraction" else f"{pct:.1f} %"


def threshold_text(threshold_pct: float, unit: str) -> str:
    return f"threshold {threshold_pct:g} {'pp' if unit == 'fraction' else '%'}"


@dataclass(frozen=True)
class Decision:
    """A decided verdict, not yet worded: what was compared, the kind, and what it rested on.

    ``evidence`` says what the test found (or, for ``inconclusive`` and ``new``, why no test ran);
    ``remedy`` is the command line shown under a failing verdict; ``cause``, for an inconclusive verdict,
    whether a test ran (``unsettled``) or none could (``untestable``, the default); ``paired``, the paired
    estimate a block-pair test found (recorded in the verdict as it is).
    """

    metric: str
    kind: VerdictKind
    unit: str
    better: Direction
    reference: float | None
    current: float | None
    threshold_pct: float
    against: str
    evidence: str
    p_value: float | None = None
    detectable_pct: float | None = None
    between_runs_p: float | None = None
    runs: int = 1
    remedy: str = ""
    cause: InconclusiveCause | None = None
    paired: PairedEvidence | None = None


def word(decision: Decision) -> Verdict:
    """The verdict of ``decision``, with its one message and change text."""
    d = decision
    change = change_text(d.reference, d.current, d.better, d.unit)
    cause: InconclusiveCause | None = None
    if d.kind == "inconclusive":
        cause = d.cause or "untestable"
    stated = _UNSETTLED_LEAD if cause == "unsettled" else _LEADS[d.kind]
    lead = f"{d.metric} {stated} against {d.against}"
    if d.kind == "new":
        message = f"{lead}: {d.evidence} (current {format_quantity(d.current, d.unit)})"
    else:
        figures = f"{format_quantity(d.reference, d.unit)} -> {format_quantity(d.current, d.unit)}"
        message = f"{lead}: {figures}" + (f", {change}" if change else "")
        message += f"; {threshold_text(d.threshold_pct, d.unit)}; {d.evidence}"
        if (d.kind == "unchanged" or cause == "unsettled") and d.detectable_pct is not None:
            message += f"; smallest change this test could detect: {detectable_text(d.detectable_pct, d.unit)}"
        if d.kind in ("regression", "improvement", "unchanged") and (seen := seen_by(d.metric)):
            message += f"; {'seen' if d.kind != 'unchanged' else 'read'} by {seen}"
    if d.remedy:
        message += f".\n{d.remedy}"
    ratio = None
    if d.reference is not None and d.current is not None:
        if d.reference != 0.0:
            ratio = d.current / d.reference
        else:
            ratio = 1.0 if d.current == 0.0 else math.copysign(math.inf, d.current)
    return Verdict(d.metric, d.kind, d.reference, d.current, ratio, d.threshold_pct, d.p_value, message,
                   d.between_runs_p, d.runs, change, d.detectable_pct, cause, d.paired)


def fails(verdict: Verdict, fail_on_improvement: bool = False,
          fail_on_inconclusive: InconclusiveScope = "none") -> bool:
    """Whether ``verdict`` fails its item: a regression always; an improvement when asked; an inconclusive
    verdict when the scope takes it in (``untestable``: only those no test could judge; ``all``)."""
    if verdict.kind == "regression":
        return True
    if verdict.kind == "improvement":
        return fail_on_improvement
    if verdict.kind == "inconclusive":
        return fail_on_inconclusive == "all" or (fail_on_inconclusive == "untestable" and verdict.untestable)
    return False


def failing_verdicts(verdicts: Iterable[Verdict], fail_on_improvement: bool = False,
                     fail_on_inconclusive: InconclusiveScope = "none") -> list[Verdict]:
    """The verdicts of ``verdicts`` that fail an item (:func:`fails`)."""
    return [v for v in verdicts if fails(v, fail_on_improvement, fail_on_inconclusive)]


def failure_text(verdicts: Sequence[Verdict]) -> str:
    """What a failing item shows: one paragraph per failing verdict."""
    return "\n\n".join(v.message for v in verdicts)
