"""Reports of a run: the terminal table, the markdown job summary and the results JSON file.

All three read a :class:`RunResults`; verdict columns appear when any case was compared.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

from tabulate import tabulate

from pytest_dmlbench.baseline.compare import format_quantity
from pytest_dmlbench.baseline.jsonio import read_results as _read_results
from pytest_dmlbench.baseline.jsonio import write_results
from pytest_dmlbench.results import CaseResult, MetricResult, RunResults, Verdict

__all__ = [
    "append_step_summary",
    "markdown_summary",
    "read_results",
    "table_rows",
    "terminal_table",
    "write_results",
]

CASE_WIDTH = 44
OVERSUBSCRIBED_MARK = "!"
_VERDICT_ORDER: tuple[str, ...] = ("regression", "improvement", "new", "unchanged")


def read_results(path: Path) -> RunResults:
    """Read a results JSON file written by ``--dmlbench-json`` (BaselineError naming the file if unusable)."""
    return _read_results(Path(path), "Re-create it with `pytest --dmlbench --dmlbench-json PATH`.")


def _short_case(nodeid: str, width: int = CASE_WIDTH) -> str:
    """The node id without its folder, cut from the left so the parameters stay visible."""
    path, sep, rest = nodeid.partition("::")
    text = path.rsplit("/", 1)[-1] + sep + rest
    return text if len(text) <= width else "..." + text[-(width - 3) :]


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


def _verdict_cell(verdict: Verdict | None) -> str:
    if verdict is None:
        return "-"
    if verdict.kind in ("regression", "improvement") and verdict.p_value is not None:
        label = verdict.kind.upper() if verdict.kind == "regression" else verdict.kind
        return f"{label} p={verdict.p_value:.2g}"
    return verdict.kind


def _change_cell(verdict: Verdict | None) -> str:
    if verdict is None or verdict.ratio is None or verdict.ratio != verdict.ratio:
        return ""
    return f"{(verdict.ratio - 1) * 100:+.1f}%"


def _metric_cells(metric: MetricResult) -> list[str]:
    stats = metric.stats
    return [
        metric.name,
        format_quantity(stats.median, metric.unit),
        format_quantity(stats.iqr, metric.unit),
        str(stats.rounds),
    ]


def table_rows(results: RunResults) -> tuple[list[str], list[list[str]]]:
    """Headers and rows: the first row of a case names it; one row per metric below it."""
    compared = _compared(results)
    headers = ["case", "ws", "metric", "median", "IQR", "n"]
    if compared:
        headers += ["baseline", "change", "verdict"]
    headers.append("")
    rows: list[list[str]] = []
    for case in results.cases:
        by_metric = {v.metric: v for v in case.verdicts}
        flag = OVERSUBSCRIBED_MARK if oversubscribed(case, results) else ""
        first = True
        metrics: list[MetricResult | None] = [*case.metrics.values()] or [None]
        for metric in metrics:
            head = [_short_case(case.nodeid), str(case.world_size)] if first else ["", ""]
            cells = _metric_cells(metric) if metric is not None else [f"({case.outcome})", "", "", ""]
            row = head + cells
            if compared:
                verdict = by_metric.get(metric.name) if metric is not None else None
                unit = metric.unit if metric is not None else ""
                base = format_quantity(verdict.baseline_median, unit) if verdict else ""
                row += [
                    base if verdict and verdict.kind != "new" else "",
                    _change_cell(verdict),
                    _verdict_cell(verdict),
                ]
            row.append(flag if first else "")
            rows.append(row)
            first = False
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
        if v.kind in ("regression", "improvement")
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
