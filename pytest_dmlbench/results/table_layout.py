"""The results table laid out for a terminal: every line fits its width (pytest's terminal width, or
``COLUMNS``, or 80 columns in a pipe or a CI log).

Case ids lose the directory all of them share (named once above the table) and keep the test part. When
whole ids leave the figures too little room, the table is grouped: each file and each test function with
several cases named once, a case by its parameters beside its figures; a label that still does not fit
gets a line of its own above them. Every note and message is wrapped to the width.
"""

from __future__ import annotations

import re
import shutil
import textwrap
from collections.abc import Callable, Sequence

from pytest_dmlbench.results import NOTABLE_KINDS, VERDICT_KINDS, CaseResult, RunResults
from pytest_dmlbench.results.case_notes import case_notes, notes_count_text
from pytest_dmlbench.results.figures import labelled
from pytest_dmlbench.results.settled import settled_text
from pytest_dmlbench.results.table import (
    INTERRUPTED_KEY,
    METRIC_PREFIX,
    OTHERS_MARK,
    OVERSUBSCRIBED_MARK,
    UNITS_NOTE,
    case_counts,
    change_cell,
    compared,
    headline_metric,
    headline_verdict_cell,
    interval_text,
    metric_cells,
    ordered_cases,
    oversubscribed,
    reference_column,
    saved_runs_text,
    verdict_cell,
    verdict_counts,
    wrap_nodeid,
)
from pytest_dmlbench.results.units import named_scale

DEFAULT_WIDTH = 80
MIN_WIDTH = 40
GAP = "  "
INDENT = "    "
NOT_COMPARED = ("no verdicts: no case had a baseline or a REF to compare with, so there are no change and verdict "
                "columns (--dmlbench-save stores baselines; --dmlbench-against REF compares with a commit)")
VERBOSE_HINT = "-v: every metric"
PAIRED_NOTE = ("REF: REF's median over its blocks; median: a paired figure is REF's moved by the paired estimate, "
               "so the change is that estimate")
_COMMAND = re.compile(r"`?(?:pytest --dmlbench|python -m pytest_dmlbench)\b")


def terminal_width(fallback: int = DEFAULT_WIDTH) -> int:
    """``COLUMNS`` when set, else the terminal's width, else ``fallback`` (a pipe or a CI log)."""
    return max(MIN_WIDTH, shutil.get_terminal_size((fallback, 24)).columns)


def short_ids(nodeids: Sequence[str]) -> tuple[dict[str, str], str]:
    """Each node id without the directory all of them share, and that directory (``bench_cases/``; empty
    when they share none). The test part is kept whole."""
    folders = [nodeid.split("::", 1)[0].split("/")[:-1] for nodeid in nodeids]
    common = folders[0] if folders else []
    for folder in folders[1:]:
        size = 0
        while size < min(len(common), len(folder)) and common[size] == folder[size]:
            size += 1
        common = common[:size]
    prefix = "".join(f"{part}/" for part in common)
    return {nodeid: nodeid[len(prefix):] for nodeid in nodeids}, prefix


def wrap_text(text: str, width: int, indent: str = "") -> list[str]:
    """``text`` as lines of at most ``width`` characters, its own line breaks kept; continuation lines
    indented by ``indent``. A word longer than the width (a path) is not cut, and a command line
    (``pytest --dmlbench ...``) that would be broken gets lines of its own instead, whole, to be copied."""
    lines: list[str] = []
    for paragraph in text.splitlines() or [""]:
        lines += _wrap_paragraph(paragraph, width, indent)
    return lines


def _wrap_paragraph(paragraph: str, width: int, indent: str) -> list[str]:
    def wrap(part: str, first: str = "") -> list[str]:
        return textwrap.wrap(part, width, initial_indent=first, subsequent_indent=indent, break_long_words=False,
                             break_on_hyphens=False)

    lines = wrap(paragraph) or [""]
    found = _COMMAND.search(paragraph)
    if found is None:
        return lines
    start = found.start()
    end = paragraph.find("`", start + 1) + 1 if paragraph[start] == "`" else len(paragraph)
    command = paragraph[start: end or len(paragraph)]
    if any(command in line for line in lines):
        return lines
    before, after = paragraph[:start].rstrip(), paragraph[start + len(command):].strip()
    return [*wrap(before), (indent if before else "") + command, *wrap(after, indent)]


def id_lines(name: str, width: int, suffix: str = "") -> list[str]:
    """A case's id followed by ``suffix`` in lines of at most ``width`` characters: an id that does not
    fit is broken at natural points only (:func:`~pytest_dmlbench.results.table.wrap_nodeid`), its continuation
    lines indented."""
    if len(name) + len(suffix) <= width:
        return [name + suffix]
    parts = wrap_nodeid(name, width - len(INDENT))
    lines = [parts[0], *(INDENT + part for part in parts[1:])]
    if suffix and len(lines[-1]) + len(suffix) <= width:
        lines[-1] += suffix
    elif suffix:
        lines.append(INDENT + suffix.strip())
    return lines


def _widths(rows: Sequence[Sequence[str]]) -> list[int]:
    return [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]


def _line(cells: Sequence[str], widths: Sequence[int], right: frozenset[int], indent: str = "") -> str:
    pairs = enumerate(zip(cells, widths, strict=False))  # a continuation line has the first cell only
    text = GAP.join(cell.rjust(w) if i in right else cell.ljust(w) for i, (cell, w) in pairs)
    return (indent + text).rstrip()


def _grid(rows: Sequence[Sequence[str]]) -> tuple[list[int], int]:
    """Column widths of ``rows`` (the header among them), and the grid's total width."""
    widths = _widths(rows)
    return widths, sum(widths) + len(GAP) * (len(widths) - 1)


def _ranks(case: CaseResult, results: RunResults) -> str:
    return str(case.world_size) + (f" {OVERSUBSCRIBED_MARK}" if oversubscribed(case, results) else "")


def _name(case: CaseResult, ids: dict[str, str]) -> str:
    return ids[case.nodeid] + ("" if case.outcome == "passed" else f" ({case.outcome})")


def _compact_cells(case: CaseResult, with_verdicts: bool) -> list[str]:
    """Headline metric, its median (with its unit) and, when compared, its change and verdict."""
    headline = headline_metric(case)
    if headline is None:
        return ["(no figures)", ""] + (["", ""] if with_verdicts else [])
    verdict = next((v for v in case.verdicts if v.metric == headline.name), None)
    cells = [headline.name, metric_cells(headline, verdict).median]
    return cells + ([change_cell(verdict), headline_verdict_cell(case, verdict)] if with_verdicts else [])


def compact_lines(results: RunResults, ids: dict[str, str], width: int) -> list[str]:
    """One row per case: id, ranks, headline metric and median (change and verdict when compared). When an
    id does not fit beside the figures, the table is grouped (:func:`grouped_lines`)."""
    with_verdicts = compared(results)
    header = ["case", "ws", "headline metric", "median"] + (["change", "verdict"] if with_verdicts else [])
    right = frozenset({1, 3})
    cases = ordered_cases(results)
    names = [_name(c, ids) for c in cases]
    figures = [[_ranks(c, results), *_compact_cells(c, with_verdicts)] for c in cases]
    _, total = _grid([header[1:], *figures])
    room = width - total - len(GAP)
    if room < max(len(n) for n in names):
        return grouped_lines(cases, names, results, width)
    widths = [max([len(header[0]), *(len(n) for n in names)]), *_widths([header[1:], *figures])]
    lines = [_line(header, widths, right), _line(["-" * w for w in widths], widths, right)]
    lines += [_line([name, *row], widths, right) for name, row in zip(names, figures, strict=True)]
    return lines


SHORT_HEADLINES = {
    "throughput_samples_per_s": "throughput",
    "busbw_gbps": "busbw",
    "memcpy_gbps": "memcpy bw",
    "time_to_accuracy_s": "time to acc",
    "step_time_s": "step time",
    "total_time_s": "total time",
}
"""The headline metric's label in a grouped table, where its full name leaves the ids no room (``-v`` and
the JSON give the names; the median's unit says the rest)."""


def _tree(names: Sequence[str]) -> list[tuple[int, str, int | None]]:
    """The table's case column as a tree: ``(depth, label, index of the case or None)`` for a file's line,
    a test function's line when it has several cases, and each case (its parameters, or its test name)."""
    rows: list[tuple[int, str, int | None]] = []
    parts = [name.partition("::") for name in names]
    functions = [rest.partition("[")[0] if sep else "" for _, sep, rest in parts]
    shown_file, shown_function = None, None
    for index, (file, sep, rest) in enumerate(parts):
        if not sep:
            rows.append((0, file, index))
            shown_file = shown_function = None
            continue
        if file != shown_file:
            rows.append((0, file, None))
            shown_file, shown_function = file, None
        function = functions[index]
        siblings = sum(1 for f, (other, _, _) in zip(functions, parts, strict=True) if f == function and other == file)
        if siblings > 1 and rest != function:
            if function != shown_function:
                rows.append((1, function, None))
                shown_function = function
            rows.append((1, rest[len(function):], index))  # ``[params]`` under its function's line
        else:
            rows.append((1, rest, index))
            shown_function = None
    return rows


def grouped_lines(cases: Sequence[CaseResult], names: Sequence[str], results: RunResults,
                  width: int) -> list[str]:
    """The one-line-per-case table when whole ids leave the figures too little room: each file named once
    on a line of its own, a test function with several cases once above them, and each case by its
    parameters (``[params]``, under the function's line) or its test name beside its figures; headline
    metrics by their short labels (:data:`SHORT_HEADLINES`). A case whose label still does not fit gets a
    line of its own above its figures; the header keeps its ``case`` column."""
    with_verdicts = compared(results)
    header = ["case", "ws", "headline", "median"] + (["change", "verdict"] if with_verdicts else [])
    right = frozenset({1, 3})
    figures = [[_ranks(c, results), *_compact_cells(c, with_verdicts)] for c in cases]
    for row in figures:
        row[1] = SHORT_HEADLINES.get(row[1], row[1])
    widths = _widths([header[1:], *figures])
    room = max(len(header[0]), width - sum(widths) - len(GAP) * len(widths))
    tree = [(INDENT[:2] * depth + label, index) for depth, label, index in _tree(names)]
    widths = [max([len(header[0]), *(len(label) for label, index in tree if index is not None and len(label) <= room)]),
              *widths]
    lines = [_line(header, widths, right), _line(["-" * w for w in widths], widths, right)]
    for label, index in tree:
        if index is None:
            lines += id_lines(label, width)
            continue
        if len(label) > widths[0]:
            lines += id_lines(label, width)
            label = ""
        lines.append(_line([label, *figures[index]], widths, right))
    return lines


def _verbose_rows(case: CaseResult, with_verdicts: bool, p_values: bool) -> list[list[str]]:
    by_metric = {v.metric: v for v in case.verdicts}
    rows = []
    for metric in case.metrics.values():
        verdict = by_metric.get(metric.name)
        cells = metric_cells(metric, verdict)
        unit = named_scale(metric.unit).label
        row = [METRIC_PREFIX + metric.name, unit, _number(cells.median, unit), _number(cells.iqr, unit),
               cells.rounds]
        if with_verdicts:
            row += [_number(cells.baseline, unit), change_cell(verdict), verdict_cell(verdict, compact=not p_values)]
        rows.append(row)
    return rows


def _number(cell: str, unit: str) -> str:
    """A figure without its unit (the unit column names it)."""
    return cell[: -len(unit) - 1] if unit and cell.endswith(f" {unit}") else cell


def verbose_lines(results: RunResults, ids: dict[str, str], width: int) -> list[str]:
    """Every metric of every case: the case's id on its own line, then a row per metric with its unit,
    median, IQR and rounds (baseline, change and verdict when compared). What does not fit goes in turn:
    the p-values, then the metric name beside its figures (it gets a line of its own above them)."""
    with_verdicts = compared(results)
    header = ["metric", "unit", "median", "IQR", "n"] + (
        [reference_column(results), "change", "verdict"] if with_verdicts else [])
    cases = ordered_cases(results)
    for p_values, stacked in ((True, False), (False, False), (False, True)):
        per_case = [_verbose_rows(c, with_verdicts, p_values) for c in cases]
        shown = [header[1:], *(row[1:] for block in per_case for row in block)] if stacked else [header]
        widths, total = _grid(shown if stacked else [*shown, *(row for block in per_case for row in block)])
        if total + (len(INDENT) if stacked else 0) <= width:
            break
    right = frozenset({1, 2, 3, 4} if stacked else {2, 3, 4, 5})
    indent = INDENT if stacked else ""
    head = header[1:] if stacked else header
    lines = ([f"{INDENT[:-2]}metric, its figures on the line below"] if stacked else [])
    lines += [_line(head, widths, right, indent), _line(["-" * w for w in widths], widths, right, indent)]
    for case, block in zip(cases, per_case, strict=True):
        lines += id_lines(_name(case, ids), width, f"  ws {_ranks(case, results)}")
        by_metric = {v.metric: v for v in case.verdicts}
        for row, metric in zip(block, case.metrics, strict=True):
            if stacked:
                lines += [row[0], _line(row[1:], widths, right, indent)]
            else:
                lines.append(_line(row, widths, right))
            test = interval_text(by_metric.get(metric))
            if test:
                lines += wrap_text(f"{INDENT}    {test}", width, INDENT + "    ")
        if not block:
            lines.append(f"{INDENT}(no figures)")
        for note in case_notes(case):
            lines += wrap_text(f"{INDENT}note: {note}", width, INDENT * 2)
    return lines


def notable_lines(results: RunResults, ids: dict[str, str], width: int) -> list[str]:
    """Under the one-line-per-case table: every case with a regression, improvement or inconclusive
    verdict (most severe first), then one line per such verdict with its metric, the kind of figure it is (wall
    time, CPU time, a work counter, a memory peak: which figure saw the change) and its change."""
    order = VERDICT_KINDS.index
    ranked = sorted((min(order(v.kind) for v in notable), index, case, notable)
                    for index, case in enumerate(ordered_cases(results))
                    if (notable := [v for v in case.verdicts if v.kind in NOTABLE_KINDS]))
    lines: list[str] = []
    for _, _, case, notable in ranked:
        worst = verdict_cell(min(notable, key=lambda v: order(v.kind)), compact=True)
        lead = f"{worst:<12}  "
        name = id_lines(ids[case.nodeid], width - len(lead))
        lines += [lead + name[0], *(" " * len(lead) + part for part in name[1:])]
        for verdict in notable:
            text = f"{INDENT}{verdict_cell(verdict, compact=True)} {labelled(verdict.metric)}"
            lines += wrap_text(text + (f": {verdict.change}" if verdict.change else ""), width, INDENT * 2)
    return lines


def oversubscription_note(results: RunResults) -> str | None:
    if not any(oversubscribed(c, results) for c in results.cases):
        return None
    run = results.run
    cores = run.get("cores") or results.machine.get("logical_cores")
    return (f"{OVERSUBSCRIBED_MARK} oversubscribed: ranks x xdist workers ({run.get('xdist_workers') or 1} "
            f"worker(s)) > {cores} cores; timings of these cases share CPUs")


def terminal_table(results: RunResults, verbose: bool = False, width: int | None = None,
                   not_compared: str = NOT_COMPARED) -> str:
    """The table printed at the end of a run and by ``show``/``compare``: one line per case (its headline
    metric and that metric's verdict), or every metric with ``verbose``; no line wider than ``width``."""
    if not results.cases:
        return "pytest-dmlbench: no benchmark results"
    width = max(MIN_WIDTH, width or terminal_width())
    ids, prefix = short_ids([case.nodeid for case in results.cases])
    wrap: Callable[[str], list[str]] = lambda text: wrap_text(text, width, INDENT)  # noqa: E731
    lines = wrap(UNITS_NOTE if verbose else f"{UNITS_NOTE}; {VERBOSE_HINT}")
    if compared(results) and reference_column(results) != "baseline":
        lines += wrap(PAIRED_NOTE)
    if prefix:
        lines += wrap(f"cases under {prefix}")
    lines += verbose_lines(results, ids, width) if verbose else compact_lines(results, ids, width)
    if not verbose and any(OTHERS_MARK in line.split() for line in lines):
        lines += wrap(f"{OTHERS_MARK} another figure of the case has a notable verdict (below)")
    if not verbose:
        lines += notable_lines(results, ids, width)
    counts: tuple[str, ...] = (verdict_counts(results), settled_text(results), case_counts(results))
    if results.run.get(INTERRUPTED_KEY):  # counts of a run cut short would read like its result
        counts = ("counts left out: the run was interrupted (see the first line of the summary)",)
    notes = None if verbose else notes_count_text(results)  # -v prints each under its case
    for text in (*counts, oversubscription_note(results), notes):
        if text:
            lines += wrap(text)
    if not compared(results):
        lines += wrap(saved_runs_text(results) or not_compared)
    return "\n".join(lines)
