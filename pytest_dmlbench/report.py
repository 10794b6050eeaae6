"""Reports of a run: the terminal table, the markdown job summary and the results JSON file.

All three read a :class:`RunResults`; verdict columns appear when any case was compared.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

from tabulate import tabulate

from pytest_dmlbench.baseline.jsonio import read_results as _read_results
from pytest_dmlbench.baseline.jsonio import write_results
from pytest_dmlbench.results import NOTABLE_KINDS, VERDICT_KINDS, RunResults, Verdict
from pytest_dmlbench.table import (
    OVERSUBSCRIBED_MARK,
    UNITS_NOTE,
    case_rows,
    headers,
    notable_lines,
    oversubscribed,
)

__all__ = [
    "append_step_summary",
    "markdown_summary",
    "read_results",
    "table_rows",
    "terminal_table",
    "write_results",
]

_VERDICT_ORDER = VERDICT_KINDS
VERBOSE_HINT = "-v: every metric"


def read_results(path: Path) -> RunResults:
    """Read a results JSON file written by ``--dmlbench-json`` (BaselineError naming the file if unusable)."""
    return _read_results(Path(path), "Re-create it with `pytest --dmlbench --dmlbench-json PATH`.")


def table_rows(results: RunResults, verbose: bool = False) -> tuple[list[str], list[list[str]]]:
    """Headers and rows of the results table (see :mod:`pytest_dmlbench.table`)."""
    return headers(results, verbose), case_rows(results, verbose)


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


def terminal_table(results: RunResults, verbose: bool = False) -> str:
    """The table printed at the end of a run: one line per case, or every metric with ``verbose``."""
    if not results.cases:
        return "pytest-dmlbench: no benchmark results"
    columns, rows = table_rows(results, verbose)
    lines = [UNITS_NOTE if verbose else f"{UNITS_NOTE}; {VERBOSE_HINT}"]
    lines.append(_tabulate(rows, columns, "simple"))
    if not verbose:
        lines.extend(notable_lines(results))
    counts = _counts(results)
    if counts:
        lines.append(f"verdicts: {counts}")
    note = _oversubscription_note(results)
    if note:
        lines.append(note)
    return "\n".join(lines)


def _markdown_table(results: RunResults, verbose: bool) -> str:
    columns, rows = headers(results, verbose), case_rows(results, verbose, width=None)  # the browser wraps
    escaped = [[cell.replace("|", "\\|") for cell in row] for row in rows]
    return _tabulate(escaped, columns, "github")


def _tabulate(rows: list[list[str]], columns: list[str], fmt: str) -> str:
    return tabulate(rows, headers=columns, tablefmt=fmt, disable_numparse=True)


def markdown_summary(results: RunResults, title: str = "pytest-dmlbench results") -> str:
    """The same table as GitHub markdown, followed by the full message of every regression, improvement
    and inconclusive verdict."""
    lines = [f"## {title}", ""]
    if not results.cases:
        return "\n".join([*lines, "No benchmark results.", ""])
    lines += [UNITS_NOTE, "", _markdown_table(results, verbose=False), ""]
    lines += ["<details><summary>every metric</summary>", "", _markdown_table(results, verbose=True), "",
              "</details>", ""]
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
        if v.kind in NOTABLE_KINDS
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
