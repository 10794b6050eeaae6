"""Rows of the results table: one line per case with its headline metric and verdict, or every metric.

Node ids are shown whole, wrapped at natural break points (``/``, ``::``, ``[``, ``-``) and never cut in
the middle; cases come in natural order (``[1MB]`` before ``[4MB]`` before ``[16MB]``); every figure
carries its unit, the one its metric's name gives (``busbw_gbps`` in GB/s, ``peak_rss_mb`` in MB,
:func:`pytest_dmlbench.results.units.named_scale`). A case's line shows its headline metric and that metric's own
verdict; the terminal layout that fits these rows to a width is :mod:`pytest_dmlbench.results.table_layout`.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from pytest_dmlbench.results import (
    NOTABLE_KINDS,
    VERDICT_KINDS,
    CaseResult,
    MetricResult,
    RunResults,
    Verdict,
    oversubscribed_world,
)
from pytest_dmlbench.results.units import BYTES_SYSTEM, named_scale, natural_key

OVERSUBSCRIBED_MARK = "!"
SAVED_RUNS_KEY = "saved_runs"
"""A saved case's extra: ``{"runs": saved runs its baseline holds now, "needed": runs a verdict needs to
measure run-to-run noise}``."""
INTERRUPTED_KEY = "interrupted"
"""The run facts' key of a run stopped before its end: what stopped it (``KeyboardInterrupt``, pytest.exit's
reason); the table then leaves its counts out."""
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
UNITS_NOTE = f"units: as each metric's name says, {BYTES_SYSTEM}; fractions in %; ws: ranks"
_COARSE_BREAK = re.compile(r"(?<=/)|(?<=::)|(?=\[)")
_FINE_BREAK = re.compile(r"(?<=-)|(?<=,)|(?<=_)")


def _pieces(text: str, width: int) -> list[str]:
    """Split at ``/``, ``::`` and ``[``; a piece still wider than ``width`` also after ``-``, ``,``, ``_``."""
    pieces: list[str] = []
    for piece in _COARSE_BREAK.split(text):
        if piece:
            pieces.extend([p for p in _FINE_BREAK.split(piece) if p] if len(piece) > width else [piece])
    return pieces


def wrap_nodeid(nodeid: str, width: int) -> list[str]:
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
    return oversubscribed_world(case.world_size, int(run.get("xdist_workers") or 0), cores)


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


def verdict_cell(verdict: Verdict | None, *, compact: bool = False) -> str:
    """``REGRESSION p=3e-05`` (a regression in capitals); ``compact``: the kind alone."""
    if verdict is None:
        return "-"
    text = verdict.kind.upper() if verdict.kind == "regression" else verdict.kind
    if compact:
        return text
    if verdict.kind in ("regression", "improvement") and verdict.p_value is not None:
        text += f" p={verdict.p_value:.1g}"
    return text


OTHERS_MARK = "*"
"""After a case's headline verdict: another metric of the case has a notable verdict (listed under the table)."""


def headline_verdict_cell(case: CaseResult, headline: Verdict | None) -> str:
    """The headline metric's own verdict (beside its own change), marked when another metric is notable."""
    others = any(v.kind in NOTABLE_KINDS and (headline is None or v.metric != headline.metric)
                 for v in case.verdicts)
    return verdict_cell(headline, compact=True) + (f" {OTHERS_MARK}" if others else "")


def verdict_counts(results: RunResults) -> str:
    """``verdicts on 9 figures of 3 cases: 2 regression, 3 new, 4 unchanged`` (empty when nothing was judged):
    verdicts are per figure, and pytest counts cases, so both counts are named."""
    judged = [case for case in results.cases if case.verdicts]
    verdicts = [v for case in judged for v in case.verdicts]
    kinds: list[str] = [v.kind for v in verdicts]
    if not kinds:
        return ""
    parts = ", ".join(f"{kinds.count(k)} {k}" + (inconclusive_split(verdicts) if k == "inconclusive" else "")
                      for k in VERDICT_KINDS if kinds.count(k))
    return f"verdicts on {len(kinds)} figure(s) of {len(judged)} case(s): {parts}"


def inconclusive_counts(verdicts: Iterable[Verdict]) -> tuple[int, int]:
    """How many of ``verdicts`` are inconclusive as untestable, and how many as unsettled."""
    causes = [v.inconclusive_cause for v in verdicts]
    return causes.count("untestable"), causes.count("unsettled")


def inconclusive_split(verdicts: Sequence[Verdict]) -> str:
    """`` (2 untestable, 1 unsettled)``: the inconclusive verdicts of ``verdicts`` by cause, counted apart."""
    untestable, unsettled = inconclusive_counts(verdicts)
    return f" ({untestable} untestable, {unsettled} unsettled)"


def case_counts(results: RunResults) -> str:
    """``cases by headline verdict: 1 regression, 2 unchanged`` (empty when nothing was judged)."""
    kinds = [v.kind for case in results.cases if (v := _headline_verdict(case)) is not None]
    parts = ", ".join(f"{kinds.count(k)} {k}" for k in VERDICT_KINDS if kinds.count(k))
    return f"cases by headline verdict: {parts}" if parts else ""


def _headline_verdict(case: CaseResult) -> Verdict | None:
    headline = headline_metric(case)
    return next((v for v in case.verdicts if headline is not None and v.metric == headline.name), None)


def interval_text(verdict: Verdict | None) -> str:
    """What a verdict's test showed, for ``-v``: the paired interval and its pairs, and the smallest change the
    test could detect (empty where no test ran)."""
    if verdict is None:
        return ""
    parts = []
    if verdict.paired is not None:
        e = verdict.paired
        level = f"{100 * e.confidence:g}%"
        if e.scale == "points":
            parts.append(f"{level} CI {100 * e.ci_low:+.2f} to {100 * e.ci_high:+.2f} pp over {e.pairs} pairs")
        else:
            parts.append(f"ratio {e.estimate:.3f}, {level} CI {e.ci_low:.3f}-{e.ci_high:.3f} over {e.pairs} pairs")
    if verdict.detectable_pct is not None and verdict.kind != "new":
        unit = "pp" if verdict.paired is not None and verdict.paired.scale == "points" else "%"
        detect = verdict.detectable_pct
        parts.append(f"detects {detect:.1f} {unit}" if math.isfinite(detect)
                     else "detects no change (too few readings)")
    return "; ".join(parts)


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
    """The figures in the metric's own unit (never rescaled, so a column of one metric reads in one unit)."""
    stats = metric.stats
    scale = named_scale(metric.unit)
    base = verdict.baseline_median if verdict is not None else None
    # a paired verdict's figure: REF's block median moved by the paired estimate, so that the columns give the
    # change the verdict prints
    shown = (verdict.current_median if verdict is not None and verdict.paired is not None
             and verdict.current_median is not None else stats.median)
    return MetricCells(
        median=scale.quantity(shown),
        iqr=scale.quantity(stats.iqr) if stats.rounds > 1 else "",
        rounds=str(stats.rounds),
        baseline=scale.quantity(base) if base is not None else "",
    )


def compared(results: RunResults) -> bool:
    return any(case.verdicts for case in results.cases)


def reference_column(results: RunResults) -> str:
    """The name of the column holding what each figure was compared with: ``baseline`` (the stored
    figures), ``REF`` (re-measured beside the working tree with ``--dmlbench-against``), or both names when
    the results mix the two."""
    judged = [case for case in results.cases if case.verdicts]
    paired = sum("paired" in case.extra for case in judged)
    return "REF" if judged and paired == len(judged) else "baseline" if paired == 0 else "baseline/REF"


def headers(results: RunResults, verbose: bool) -> list[str]:
    columns = ["case / metric", "ws", "median", "IQR", "n"] if verbose else ["case", "ws", "headline metric", "median"]
    if compared(results):
        columns += [reference_column(results), "change", "verdict"][0 if verbose else 1 :]
    return columns


def _ranks_cell(case: CaseResult, results: RunResults) -> str:
    return str(case.world_size) + (f" {OVERSUBSCRIBED_MARK}" if oversubscribed(case, results) else "")


def _outcome_note(case: CaseResult) -> str:
    return "" if case.outcome == "passed" else f" ({case.outcome})"


def case_rows(results: RunResults, verbose: bool = False) -> list[list[str]]:
    """Rows of the markdown table, ids whole (a browser wraps them): one per case (headline metric, its
    median, change and verdict), or with ``verbose`` a row per case followed by one row per metric with
    IQR, rounds and baseline too. The terminal's layout is :mod:`pytest_dmlbench.results.table_layout`."""
    with_verdicts = compared(results)
    columns = len(headers(results, verbose))
    rows: list[list[str]] = []
    for case in ordered_cases(results):
        lines = [case.nodeid + _outcome_note(case)]
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
            row += [change_cell(verdict), headline_verdict_cell(case, verdict)]
        rows.append(row)
    return rows


def saved_runs_text(results: RunResults) -> str:
    """``saved run 2 of 3 ...`` after ``--dmlbench-save`` (empty when the run saved nothing): where the
    saves stand against the saved runs a verdict needs to measure this machine's run-to-run noise."""
    counts = [(int(saved["runs"]), int(saved["needed"])) for case in results.cases
              if isinstance(saved := case.extra.get(SAVED_RUNS_KEY), dict)]
    if not counts:
        return ""
    needed = max(need for _, need in counts)
    runs = sorted({run for run, _ in counts})
    lead = (f"saved run {runs[0]} of {needed}" if len(runs) == 1 and runs[0] <= needed
            else f"saved run {runs[0]} ({needed} needed)" if len(runs) == 1
            else "saved runs " + ", ".join(f"{sum(r == run for r, _ in counts)} case(s) at {run}" for run in runs)
            + f" of {needed}")
    short = needed - runs[0]
    if short > 0:
        return (f"{lead}: baselines saved; save {short} more time(s) (--dmlbench-save) before verdicts measure "
                "this machine's run-to-run noise, and compare without --dmlbench-save")
    return f"{lead}: baselines saved, enough for verdicts to measure run-to-run noise; compare without --dmlbench-save"
