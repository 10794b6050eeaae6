"""Reports of a run: the terminal table, the markdown job summary and the results JSON file.

All three read a :class:`RunResults`; verdict columns appear when any case was compared.
"""

from __future__ import annotations

import math
import os
from collections.abc import Sequence
from pathlib import Path

from tabulate import tabulate

from pytest_dmlbench.baseline.jsonio import read_results as _read_results
from pytest_dmlbench.baseline.jsonio import write_results
from pytest_dmlbench.results import CHANGE_KINDS, VERDICT_KINDS, CaseResult, RunResults, Verdict

__all__ = [
    "append_step_summary",
    "markdown_summary",
    "read_results",
    "table_rows",
    "terminal_table",
    "write_results",
]

LABEL_WIDTH = 48
OVERSUBSCRIBED_MARK = "!"
METRIC_PREFIX = "- "
_VERDICT_ORDER = VERDICT_KINDS
_SCALES = {
    "s": ((1.0, "s"), (1e-3, "ms"), (1e-6, "us"), (1e-9, "ns")),
    "bytes": ((2.0**30, "GiB"), (2.0**20, "MiB"), (2.0**10, "KiB"), (1.0, "bytes")),
}


def read_results(path: Path) -> RunResults:
    """Read a results JSON file written by ``--dmlbench-json`` (BaselineError naming the file if unusable)."""
    return _read_results(Path(path), "Re-create it with `pytest --dmlbench --dmlbench-json PATH`.")


def _case_label(case: CaseResult, flag: bool) -> str:
    """File name and test id (folders dropped, middle elided when long), world size, oversubscription flag."""
    path, sep, rest = case.nodeid.partition("::")
    text = path.rsplit("/", 1)[-1] + sep + rest
    suffix = f"  ws={case.world_size}" + (f" {OVERSUBSCRIBED_MARK}" if flag else "")
    width = LABEL_WIDTH - len(suffix)
    if len(text) > width:
        head = (width - 3) // 2
        text = text[:head] + "..." + text[len(text) - (width - 3 - head) :]
    return text + suffix


def oversubscribed(case: CaseResult, results: RunResults) -> bool:
    """Ranks x xdist workers > cores for this case (its timings then share CPUs)."""
    run = results.run
    cores = run.get("cores") or results.machine.get("logical_cores")
    if not isinstance(cores, int) or cores <= 0:
        return bool(run.get("oversubscribed", False))
    workers = max(1, int(run.get("xdist_workers") or 0))
    return case.world_size * workers > cores


def _compared(results: RunResults) -> bool:
    return any(case.verdicts for case in results.cases)


def _scale(unit: str, reference: float) -> tuple[float, str]:
    """Divisor and unit label that make ``reference`` readable (ms for 0.0123 s, MiB for 4e6 bytes)."""
    scales = _SCALES.get(unit)
    if not scales or not math.isfinite(reference) or reference == 0:
        return 1.0, unit
    for divisor, label in scales:
        if abs(reference) >= divisor:
            return divisor, label
    return scales[-1]


def _number(value: float | None, divisor: float) -> str:
    if value is None or math.isnan(value):
        return ""
    return f"{value / divisor:.4g}"


def _verdict_cell(verdict: Verdict | None) -> str:
    if verdict is None:
        return "-"
    if verdict.kind in CHANGE_KINDS and verdict.p_value is not None:
        label = verdict.kind.upper() if verdict.kind == "regression" else verdict.kind
        return f"{label} p={verdict.p_value:.1g}"
    return verdict.kind


def _change_cell(verdict: Verdict | None) -> str:
    if verdict is None or verdict.ratio is None or not math.isfinite(verdict.ratio):
        return "" if verdict is None or verdict.ratio is None or math.isnan(verdict.ratio) else "inf"
    return f"{(verdict.ratio - 1) * 100:+.1f}%"


def table_rows(results: RunResults) -> tuple[list[str], list[list[str]]]:
    """Headers and rows: a row naming each case, then one indented row per metric.

    Median, IQR and baseline share one unit per row (shown with the median), scaled for readability.
    """
    compared = _compared(results)
    headers = ["case / metric", "median", "IQR", "n"]
    if compared:
        headers += ["baseline", "change", "verdict"]
    rows: list[list[str]] = []
    for case in results.cases:
        by_metric = {v.metric: v for v in case.verdicts}
        outcome = "" if case.outcome == "passed" else case.outcome
        rows.append([_case_label(case, oversubscribed(case, results)), outcome] + [""] * (len(headers) - 2))
        for metric in case.metrics.values():
            stats = metric.stats
            divisor, unit = _scale(metric.unit, stats.median)
            median = _number(stats.median, divisor)
            row = [
                METRIC_PREFIX + metric.name,
                f"{median} {unit}".strip() if median else "n/a",
                _number(stats.iqr, divisor),
                str(stats.rounds),
            ]
            if compared:
                verdict = by_metric.get(metric.name)
                base = _number(verdict.baseline_median, divisor) if verdict is not None else ""
                row += [base, _change_cell(verdict), _verdict_cell(verdict)]
            rows.append(row)
    return headers, rows


def _counts(results: RunResults) -> str:
    kinds: list[str] = [v.kind for case in results.cases for v in case.verdicts]
    parts = [f"{kinds.count(k)} {k}" for k in _VERDICT_ORDER if kinds.count(k)]
    return ", ".join(parts)


def _oversubscription_note(results: RunResults) -> str | None:
    if not any(oversubscribed(c, results) for c in results.cases):
        return None
    run = results.run
    cores = run.get("cores") or results.machine.get("logical_cores")
    return (
        f"{OVERSUBSCRIBED_MARK} oversubscribed: ranks x xdist workers ({run.get('xdist_workers') or 1} "
        f"worker(s)) > {cores} cores; timings of these cases share CPUs"
    )


def terminal_table(results: RunResults) -> str:
    """The table printed at the end of a run (fits 120 columns for typical node ids)."""
    if not results.cases:
        return "pytest-dmlbench: no benchmark results"
    headers, rows = table_rows(results)
    lines = [tabulate(rows, headers=headers, tablefmt="simple", disable_numparse=True)]
    counts = _counts(results)
    if counts:
        lines.append(f"verdicts: {counts}")
    note = _oversubscription_note(results)
    if note:
        lines.append(note)
    return "\n".join(lines)


def markdown_summary(results: RunResults, title: str = "pytest-dmlbench results") -> str:
    """The same table as GitHub markdown, followed by the full message of every regression/improvement."""
    lines = [f"## {title}", ""]
    if not results.cases:
        return "\n".join([*lines, "No benchmark results.", ""])
    headers, rows = table_rows(results)
    escaped = [[cell.replace("|", "\\|") for cell in row] for row in rows]
    lines.append(tabulate(escaped, headers=headers, tablefmt="github", disable_numparse=True))
    lines.append("")
    counts = _counts(results)
    if counts:
        lines += [f"**Verdicts:** {counts}", ""]
    note = _oversubscription_note(results)
    if note:
        lines += [f"_{note}_", ""]
    notable: Sequence[tuple[str, Verdict]] = [
        (case.nodeid, v)
        for case in results.cases
        for v in case.verdicts
        if v.kind in CHANGE_KINDS
    ]
    for nodeid, verdict in notable:
        lines += [f"### {verdict.kind}: `{nodeid}` {verdict.metric}", "", "```", verdict.message, "```", ""]
    return "\n".join(lines)


def append_step_summary(results: RunResults, path: str | os.PathLike[str] | None = None) -> Path | None:
    """Append the markdown summary to ``path`` or ``$GITHUB_STEP_SUMMARY``; the file, or None if unset."""
    target = path if path is not None else os.environ.get("GITHUB_STEP_SUMMARY")
    if not target:
        return None
    with open(target, "a", encoding="utf-8") as f:
        f.write(markdown_summary(results) + "\n")
    return Path(target)
