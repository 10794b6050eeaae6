"""Reports of a run: the terminal table, the markdown job summary and the results JSON file.

All three read a :class:`RunResults`; verdict columns appear when any case was compared.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

from tabulate import tabulate

from pytest_dmlbench.results import NOTABLE_KINDS, RunResults, Verdict
from pytest_dmlbench.results.case_notes import case_notes
from pytest_dmlbench.results.figures import labelled
from pytest_dmlbench.results.jsonio import read_results as _read_results
from pytest_dmlbench.results.jsonio import write_results
from pytest_dmlbench.results.settled import settled_text
from pytest_dmlbench.results.table import (
    UNITS_NOTE,
    case_counts,
    case_rows,
    compared,
    headers,
    oversubscribed,
    verdict_counts,
)
from pytest_dmlbench.results.table_layout import NOT_COMPARED, terminal_table
from pytest_dmlbench.results.table_layout import oversubscription_note as _oversubscription_note

__all__ = [
    "append_step_summary",
    "markdown_summary",
    "oversubscribed",
    "read_results",
    "table_rows",
    "terminal_table",
    "write_results",
]


def read_results(path: Path) -> RunResults:
    """Read a results JSON file written by ``--dmlbench-json`` (BaselineError naming the file if unusable)."""
    return _read_results(Path(path), "Re-create it with `pytest --dmlbench --dmlbench-json PATH`.")


def table_rows(results: RunResults, verbose: bool = False) -> tuple[list[str], list[list[str]]]:
    """Headers and rows of the results table (see :mod:`pytest_dmlbench.results.table`)."""
    return headers(results, verbose), case_rows(results, verbose)


def _markdown_table(results: RunResults, verbose: bool) -> str:
    columns, rows = headers(results, verbose), case_rows(results, verbose)  # the browser wraps
    escaped = [[cell.replace("|", "\\|") for cell in row] for row in rows]
    return _tabulate(escaped, columns, "github")


def _tabulate(rows: list[list[str]], columns: list[str], fmt: str) -> str:
    return tabulate(rows, headers=columns, tablefmt=fmt, disable_numparse=True)


def markdown_summary(results: RunResults, title: str = "pytest-dmlbench results") -> str:
    """The same table as GitHub markdown, followed by the full message of every regression, improvement
    and inconclusive verdict, then every case's notes."""
    lines = [f"## {title}", ""]
    if not results.cases:
        return "\n".join([*lines, "No benchmark results.", ""])
    lines += [UNITS_NOTE, "", _markdown_table(results, verbose=False), ""]
    lines += ["<details><summary>every metric</summary>", "", _markdown_table(results, verbose=True), "",
              "</details>", ""]
    counts = (verdict_counts(results), settled_text(results), case_counts(results))
    lines += [f"**{text[0].upper()}{text[1:]}**" for text in counts if text]
    lines += [""] if compared(results) else [NOT_COMPARED, ""]
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
        cause = verdict.inconclusive_cause
        kind = f"{verdict.kind} ({cause})" if cause is not None else verdict.kind
        lines += [f"### {kind}: `{nodeid}` {labelled(verdict.metric)}", "", "```", verdict.message, "```", ""]
    noted = [(case.nodeid, notes) for case in results.cases if (notes := case_notes(case))]
    if noted:
        lines += ["### notes", ""]
        lines += [f"- `{nodeid}`: {note}" for nodeid, notes in noted for note in notes]
        lines += [""]
    return "\n".join(lines)


def append_step_summary(results: RunResults, path: str | os.PathLike[str] | None = None) -> Path | None:
    """Append the markdown summary to ``path`` or ``$GITHUB_STEP_SUMMARY``; the file, or None if unset."""
    target = path if path is not None else os.environ.get("GITHUB_STEP_SUMMARY")
    if not target:
        return None
    with open(target, "a", encoding="utf-8") as f:
        f.write(markdown_summary(results) + "\n")
    return Path(target)
