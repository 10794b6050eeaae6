"""Rows of the results table: one line per case with its headline metric and verdict, or every metric.

Node ids are shown whole, wrapped at natural break points (``/``, ``::``, ``[``, ``-``) and never cut in
the middle; cases come in natural order (``[1MB]`` before ``[4MB]`` before ``[16MB]``); every figure
carries its unit, and a row's median, IQR and baseline share one scale (:mod:`pytest_dmlbench.units`).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from pytest_dmlbench.results import NOTABLE_KINDS, VERDICT_KINDS, CaseResult, MetricResult, RunResults, Verdict
from pytest_dmlbench.units import BYTES_SYSTEM, natural_key, scale_for

CASE_WIDTH = 34
OVERSUBSCRIBED_MARK = "!"
METRIC_PREFIX = "- "
HEADLINE_METRICS: tuple[str, ...] = (
    "throughput_samples_per_s",
    "busbw_gbps",
    "memcpy_gbps",
    "accuracy",
    "time_to_accuracy_s",
    "step_time_s",
    "total_time_s",
)
"""The figure a case's single line shows: the first of these the case has (else its first metric)."""
VERDICT_SEVERITY = VERDICT_KINDS
UNITS_NOTE = f"units: {BYTES_SYSTEM}; fractions in %; ws: ranks"
_COARSE_BREAK = re.compile(r"(?<=/)|(?<=::)|(?=\[)")
_FINE_BREAK = re.compile(r"(?<=-)|(?<=,)|(?<=_)")


def _pieces(text: str, width: int) -> list[str]:
    """Split at ``/``, ``::`` and ``[``; a piece still wider than ``width`` also after ``-``, ``,``, ``_``."""
    pieces: list[str] = []
    for piece in _COARSE_BREAK.split(text):
        if piece:
            pieces.extend([p for p in _FINE_BREAK.split(piece) if p] if len(piece) > width else [piece])
    return pieces


def wrap_nodeid(nodeid: str, width: int = CASE_WIDTH) -> list[str]:
    """``nodeid`` as lines of at most ``width`` characters, broken only at natural points (after ``/``,
    ``::``, before ``[``; inside a too-long piece after ``-``, ``,``, ``_``), never inside a word or number:
    a piece longer than ``width`` with no break point stays whole on its own line. Joined, the lines give
    the node id back."""
    lines: list[str] = []
    current = ""
    for piece in _pieces(nodeid, width):
        if current and len(current) + len(piece) > width:
            lines.append(current)
            current = piece
        else:
            current += piece
    if current:
        lines.append(current)
    return lines or [""]


def oversubscribed(case: CaseResult, results: RunResults) -> bool:
    """Ranks x xdist workers > cores for this case (its timings then share CPUs)."""
    run = results.run
    cores = run.get("cores") or results.machine.get("logical_cores")
    if not isinstance(cores, int) or cores <= 0:
        return bool(run.get("oversubscribed", False))
    workers = max(1, int(run.get("xdist_workers") or 0))
    return case.world_size * workers > cores


def ordered_cases(results: RunResults) -> list[CaseResult]:
    """Cases in natural order of their node ids."""
    return sorted(results.cases, key=lambda case: natural_key(case.nodeid))


def headline_metric(case: CaseResult) -> MetricResult | None:
    """The metric a case's single line shows."""
    for name in HEADLINE_METRICS:
        if name in case.metrics:
            return case.metrics[name]
    others = [m for m in case.metrics.values() if m.name not in ("peak_rss_mb", "peak_cuda_mb")]
    candidates = others or list(case.metrics.values())
    return candidates[0] if candidates else None


def worst_verdict(verdicts: Sequence[Verdict]) -> Verdict | None:
    """The most severe verdict of a case (regression, then improvement, new, unchanged)."""
    ranked = sorted(verdicts, key=lambda v: VERDICT_SEVERITY.index(v.kind) if v.kind in VERDICT_SEVERITY else 99)
    return ranked[0] if ranked else None


def verdict_cell(verdict: Verdict | None, *, compact: bool = False) -> str:
    """``REGRESSION p=3e-05`` (a regression in capitals); ``compact``: the kind alone (the notable verdicts'
    metrics are listed under the table, :func:`notable_lines`)."""
    if verdict is None:
        return "-"
    text = verdict.kind.upper() if verdict.kind == "regression" else verdict.kind
    if compact:
        return text
    if verdict.kind in ("regression", "improvement") and verdict.p_value is not None:
        text += f" p={verdict.p_value:.1g}"
    return text


NOTABLE_WIDTH = 120


def notable_lines(results: RunResults, width: int = NOTABLE_WIDTH) -> list[str]:
    """Under the one-line table, which shows each case's worst kind only: every case with a regression,
    improvement or inconclusive verdict (most severe first), its node id wrapped to ``width``, then one
    line per such verdict with its metric and change."""
    lines: list[str] = []
    indent = " " * 14
    ranked = sorted((min(VERDICT_SEVERITY.index(v.kind) for v in notable), index, case, notable)
                    for index, case in enumerate(ordered_cases(results))
                    if (notable := [v for v in case.verdicts if v.kind in NOTABLE_KINDS]))
    for _, _, case, notable in ranked:
        worst = verdict_cell(min(notable, key=lambda v: VERDICT_SEVERITY.index(v.kind)), compact=True)
        ids = wrap_nodeid(case.nodeid, width - len(indent))
        lines.append(f"{worst:<12}  {ids[0]}")
        lines.extend(indent + part for part in ids[1:])
        lines.extend(f"{indent}{verdict_cell(v, compact=True)} {v.metric}" + (f": {v.change}" if v.change else "")
                     for v in notable)
    return lines


def change_cell(verdict: Verdict | None) -> str:
    """The verdict's own worded change (``+18.8 % slower``), the text its message gives."""
    return "" if verdict is None else verdict.change


@dataclass(frozen=True)
class MetricCells:
    """A metric's figures as text, median, IQR and baseline in one scale."""

    median: str
    iqr: str
    rounds: str
    baseline: str


def metric_cells(metric: MetricResult, verdict: Verdict | None) -> MetricCells:
    stats = metric.stats
    scale = scale_for(metric.unit, stats.median)
    base = verdict.baseline_median if verdict is not None else None
    return MetricCells(
        median=scale.quantity(stats.median),
        iqr=scale.quantity(stats.iqr) if stats.rounds > 1 else "",
        rounds=str(stats.rounds),
        baseline=scale.quantity(base) if base is not None else "",
    )


def compared(results: RunResults) -> bool:
    return any(case.verdicts for case in results.cases)


def headers(results: RunResults, verbose: bool) -> list[str]:
    columns = ["case / metric", "ws", "median", "IQR", "n"] if verbose else ["case", "ws", "headline metric", "median"]
    if compared(results):
        columns += ["baseline", "change", "verdict"][0 if verbose else 1 :]
    return columns


def _ranks_cell(case: CaseResult, results: RunResults) -> str:
    return str(case.world_size) + (f" {OVERSUBSCRIBED_MARK}" if oversubscribed(case, results) else "")


def _outcome_note(case: CaseResult) -> str:
    return "" if case.outcome == "passed" else f" ({case.outcome})"


def case_rows(results: RunResults, verbose: bool = False, width: int | None = CASE_WIDTH) -> list[list[str]]:
    """One row per case (headline metric, its median and change, the case's worst verdict), or with
    ``verbose`` a row per case followed by one row per metric with IQR, rounds and baseline too.

    With a ``width``, a node id longer than it is wrapped over several rows (:func:`wrap_nodeid`) and the
    case's figures sit on the row of its last line; ``width=None`` keeps every id on one row."""
    with_verdicts = compared(results)
    columns = len(headers(results, verbose))
    rows: list[list[str]] = []
    for case in ordered_cases(results):
        name = case.nodeid + _outcome_note(case)
        lines = wrap_nodeid(name, width) if width is not None else [name]
        rows.extend([line] + [""] * (columns - 1) for line in lines[:-1])
        by_metric = {v.metric: v for v in case.verdicts}
        if verbose:
            rows.append([lines[-1], _ranks_cell(case, results)] + [""] * (columns - 2))
            for metric in case.metrics.values():
                verdict = by_metric.get(metric.name)
                cells = metric_cells(metric, verdict)
                row = [METRIC_PREFIX + metric.name, "", cells.median, cells.iqr, cells.rounds]
                if with_verdicts:
                    row += [cells.baseline, change_cell(verdict), verdict_cell(verdict)]
                rows.append(row)
            continue
        headline = headline_metric(case)
        if headline is None:
            rows.append([lines[-1], _ranks_cell(case, results), "(no figures)"] + [""] * (columns - 3))
            continue
        verdict = by_metric.get(headline.name)
        cells = metric_cells(headline, verdict)
        row = [lines[-1], _ranks_cell(case, results), headline.name, cells.median]
        if with_verdicts:
            worst = worst_verdict(case.verdicts)
            shown = worst if worst is not None and worst.kind in NOTABLE_KINDS else verdict
            row += [change_cell(verdict), verdict_cell(shown, compact=True)]
        rows.append(row)
    return rows
