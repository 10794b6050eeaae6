"""Single-reading figures on block pairs: exact counts compared exactly, memory peaks tested over worlds.

Each block reads them once more. An exact count (bytes per step) that read one value in every block of each
side is compared exactly: equal, or a difference that is the change itself, judged by the threshold; no test
runs and none spends alpha. A memory peak is tested (:mod:`.memory_peaks`): a change stands beyond the threshold
at the run-level share of alpha, ``unchanged`` only where the interval at the per-figure level proves it, and
everything else is ``inconclusive (tested, not settled)``. A count that moved between blocks of one side is
not exact after all and is tested as a peak. Collective calls, in total or of one kind, fail on any change; a kind
a side counting by kind does not record is zero calls of it, and a figure REF does not record at all is ``new``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import replace

from pytest_dmlbench.gates.figures import counts_by_kind, is_call_count, is_exact_count, is_single_reading
from pytest_dmlbench.gates.gate import JudgedItem
from pytest_dmlbench.gates.paired.derived import missing_reason
from pytest_dmlbench.gates.paired.memory_peaks import peak_test
from pytest_dmlbench.gates.paired.pairs import BlockPair, Readings
from pytest_dmlbench.gates.paired.settling import unsettled_text
from pytest_dmlbench.gates.paired.statistics import SingleReading, is_inside, judge
from pytest_dmlbench.gates.paired.verdict_writer import VerdictWriter, estimate_text, reconciled_current
from pytest_dmlbench.results import CALLS_TOTAL, MetricResult, Verdict, VerdictKind, call_kind
from pytest_dmlbench.results.figures import calls_named
from pytest_dmlbench.results.stats import median
from pytest_dmlbench.results.units import format_quantity


def block_readings(pairs: Sequence[BlockPair], name: str) -> tuple[list[float], list[float]]:
    """A's and B's block medians of ``name``, over the blocks that recorded it."""
    a = [median(p.a[name]) for p in pairs if p.a.get(name)]
    b = [median(p.b[name]) for p in pairs if p.b.get(name)]
    return a, b


def single_block_readings(pairs: Sequence[BlockPair]) -> list[tuple[list[float], list[float]]]:
    """Per single-reading figure the blocks recorded, A's and B's block medians (empty where a side lacks it)."""
    names = sorted({n for p in pairs for side in (p.a, p.b) for n in side if is_single_reading(n)})
    return [block_readings(pairs, n) for n in names]


def tested_peaks(directed: Mapping[str, MetricResult]) -> list[str]:
    """The single-reading figures a case's trial tests (and counts in the run-level split): its memory peaks
    with a direction (exact counts are compared exactly and spend no alpha)."""
    return [n for n, m in directed.items() if is_single_reading(n) and not is_exact_count(n) and m.better is not None]


def single_verdicts(writer: VerdictWriter, item: JudgedItem, directed: Mapping[str, MetricResult],
                    pairs: Sequence[BlockPair], threshold: float, alpha: float, figure_alpha: float) -> list[Verdict]:
    """The verdicts on ``directed``'s single-reading figures, from every block of ``pairs``: proven unchanged at
    ``alpha`` (the per-figure level), changed at ``figure_alpha`` (the run-level share)."""
    verdicts = []
    figures, pairs = with_call_kinds(directed, pairs)
    for name, metric in figures.items():
        if not is_single_reading(name) or metric.better is None:
            continue
        a, b = block_readings(pairs, name)
        if not b and pairs:  # REF does not record it (a figure this change adds): new, as a timed figure would be
            verdicts.append(writer.write(item, metric, "new", None, median(a) if a else median(metric.samples),
                                         threshold, missing_reason(name, writer.label)))
            continue
        if not a or not b:
            side = "the working tree" if not a else writer.against
            verdicts.append(writer.write(item, metric, "inconclusive", median(b) if b else None,
                                         median(a) if a else None, threshold, f"no block of {side} recorded it"))
            continue
        if not all(math.isfinite(v) for v in a + b):
            sides = "one side" if all(math.isfinite(v) for v in a) or all(math.isfinite(v) for v in b) else "both sides"
            verdicts.append(writer.write(item, metric, "inconclusive", median(b), median(a), threshold,
                                         f"a single-reading figure not finite in every block on {sides}: nothing to "
                                         "compare"))
            continue
        exact = is_exact_count(name) and len(set(a)) == 1 and len(set(b)) == 1
        verdicts.append(exact_verdict(writer, item, metric, a[0], b[0], len(a), threshold) if exact else
                        peak_verdict(writer, item, metric, pairs, threshold, alpha, figure_alpha))
    return verdicts


def with_call_kinds(directed: Mapping[str, MetricResult], pairs: Sequence[BlockPair]
                    ) -> tuple[dict[str, MetricResult], list[BlockPair]]:
    """The calls-by-kind figures as both sides read them. A kind is recorded only where a step calls it, so a side
    whose blocks count calls by kind (:func:`~pytest_dmlbench.gates.figures.counts_by_kind`) reads zero calls of a
    kind it lacks: ``directed`` gains the kinds only REF calls, and every such block a zero of each kind missing."""
    kinds = sorted({n for n in directed if call_kind(n) is not None}
                   | {n for p in pairs for side in (p.a, p.b) for n in side if call_kind(n) is not None})
    if not kinds:
        return dict(directed), list(pairs)
    gone = {n: MetricResult.of(n, [0.0]) for n in kinds if n not in directed and CALLS_TOTAL in directed}
    return {**directed, **gone}, [replace(p, a=_zero_filled(p.a, kinds), b=_zero_filled(p.b, kinds)) for p in pairs]


def _zero_filled(readings: Readings, kinds: Sequence[str]) -> Readings:
    total = readings.get(CALLS_TOTAL)
    if not counts_by_kind(readings, median(total) if total else None):
        return readings
    return {**readings, **{n: (0.0,) for n in kinds if n not in readings}}


def exact_verdict(writer: VerdictWriter, item: JudgedItem, metric: MetricResult, a: float, b: float, blocks: int,
                  threshold: float) -> Verdict:
    """An exact count, the same in each of ``blocks`` blocks of a side: the difference is the change itself."""
    assert metric.better is not None
    kind = SingleReading(a, b, metric.better, threshold).kind()
    same = "the same count on both sides" if a == b else "a difference that is the change itself"
    rule = "judged by the threshold alone"
    if is_call_count(metric.name):
        kind = "regression" if a != b else "unchanged"
        rule = (f"and any change in the {calls_named(metric.name)} a step makes is a regression, fewer or more (a "
                "skipped synchronisation or an added one), whatever the threshold")
    evidence = (f"an exact count, compared exactly: {format_quantity(a, metric.unit)} in each of the working tree's "
                f"{blocks} blocks, {format_quantity(b, metric.unit)} in each of REF's; {same}, {rule} (no test, no "
                "share of alpha spent)")
    return writer.write(item, metric, kind, b, a, threshold, evidence, detectable_pct=0.0)


def peak_verdict(writer: VerdictWriter, item: JudgedItem, metric: MetricResult, pairs: Sequence[BlockPair],
                 threshold: float, alpha: float, figure_alpha: float) -> Verdict:
    """A memory peak's verdict from :func:`~.memory_peaks.peak_test`."""
    assert metric.better is not None
    a, b = block_readings(pairs, metric.name)
    changed = peak_test(pairs, metric.name, metric.better, figure_alpha)
    proof = peak_test(pairs, metric.name, metric.better, alpha)
    if changed is None or proof is None:
        return writer.write(item, metric, "inconclusive", median(b), median(a), threshold,
                            f"too few block pairs ({len(pairs)}) recorded it on both sides for a test")
    est = changed.estimate
    kind: VerdictKind = judge(est, threshold)
    evidence = f"a memory peak, tested {changed.basis}: {estimate_text(est, metric.unit)}"
    if kind == "unchanged":
        evidence = f"a memory peak, tested {proof.basis}: {estimate_text(proof.estimate, metric.unit)}"
        if not is_inside(proof.estimate, threshold):
            kind = "inconclusive"
            evidence += "; " + unsettled_text(proof.estimate, threshold, "", proof.settle_text)
    else:
        evidence += f", alpha {figure_alpha:.3g} (the run-level rule)"
    shown = est if kind in ("regression", "improvement") else proof.estimate
    evidence += f"; the working tree's own median block reading: {format_quantity(median(a), metric.unit)}"
    return writer.write(item, metric, kind, median(b), reconciled_current(median(b), shown, metric.better),
                        threshold, evidence, p_value=shown.p_better if kind == "improvement" else shown.p_worse,
                        detectable_pct=proof.detectable_pct(), runs=len(pairs),
                        cause="unsettled" if kind == "inconclusive" else None, paired=shown.evidence("first"))
