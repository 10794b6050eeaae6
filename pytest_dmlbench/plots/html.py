"""``report.html``: every figure embedded as base64 PNG, the verdict table and the machine, in one file
that opens from disk without a server."""

from __future__ import annotations

import base64
import html
from collections.abc import Sequence
from pathlib import Path

from pytest_dmlbench.plots.figure import Figure, Skipped
from pytest_dmlbench.results import NOTABLE_KINDS, VERDICT_KINDS, RunResults
from pytest_dmlbench.table import UNITS_NOTE, change_cell, metric_cells, ordered_cases, verdict_cell

STYLE = """
body { font-family: sans-serif; margin: 2em; max-width: 1100px; }
table { border-collapse: collapse; font-size: 0.9em; }
td, th { border: 1px solid #ccc; padding: 2px 6px; text-align: left; vertical-align: top; }
td.num { text-align: right; white-space: nowrap; }
tr.regression td { background: #fdd; } tr.improvement td { background: #dfd; }
figure { margin: 1.5em 0; } figcaption { color: #444; font-size: 0.9em; }
code { word-break: break-all; }
"""


def _image(figure: Figure) -> str:
    data = base64.b64encode(figure.path.read_bytes()).decode("ascii")
    return (f'<figure><img alt="{html.escape(figure.title)}" data-file="{html.escape(figure.path.name)}" '
            f'src="data:image/png;base64,{data}"><figcaption>{html.escape(figure.title)}: '
            f"{html.escape(figure.caption)}</figcaption></figure>")


def verdict_table(run: RunResults) -> str:
    """Every metric of every case with median, IQR, baseline, change and verdict."""
    rows = ["<tr><th>case</th><th>ranks</th><th>metric</th><th>median</th><th>IQR</th><th>n</th>"
            "<th>baseline</th><th>change</th><th>verdict</th></tr>"]
    for case in ordered_cases(run):
        by_metric = {v.metric: v for v in case.verdicts}
        for index, metric in enumerate(case.metrics.values()):
            verdict = by_metric.get(metric.name)
            cells = metric_cells(metric, verdict)
            name = (f"<code>{html.escape(case.nodeid)}</code>" + ("" if case.outcome == "passed"
                    else f" ({html.escape(case.outcome)})")) if index == 0 else ""
            kind = verdict.kind if verdict is not None else ""
            rows.append(
                f'<tr class="{kind}"><td>{name}</td><td class="num">{case.world_size if index == 0 else ""}</td>'
                f"<td>{html.escape(metric.name)}</td><td class='num'>{html.escape(cells.median)}</td>"
                f"<td class='num'>{html.escape(cells.iqr)}</td><td class='num'>{cells.rounds}</td>"
                f"<td class='num'>{html.escape(cells.baseline)}</td>"
                f"<td class='num'>{html.escape(change_cell(verdict))}</td>"
                f"<td>{html.escape(verdict_cell(verdict) if verdict is not None else '')}</td></tr>"
            )
    return "<table>" + "\n".join(rows) + "</table>"


def machine_table(run: RunResults) -> str:
    rows = [f"<tr><th>{html.escape(str(k))}</th><td>{html.escape(str(v))}</td></tr>"
            for k, v in run.machine.items()]
    return "<table>" + "\n".join(rows) + "</table>"


def write_html(path: Path, sources: Sequence[str], runs: Sequence[RunResults], figures: Sequence[Figure],
               skipped: Sequence[Skipped]) -> Path:
    """Write the report; the verdict table and machine are the latest run's."""
    run = runs[-1]
    kinds = [v.kind for case in run.cases for v in case.verdicts]
    counts = ", ".join(f"{kinds.count(k)} {k}" for k in VERDICT_KINDS
                       if kinds.count(k)) or "not compared with a baseline"
    parts = [
        "<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">',
        "<title>pytest-dmlbench report</title>", f"<style>{STYLE}</style></head><body>",
        "<h1>pytest-dmlbench report</h1>",
        "<p>Results: " + ", ".join(f"<code>{html.escape(s)}</code>" for s in sources)
        + f" (latest created {html.escape(run.created or 'unknown')}); {len(run.cases)} cases; "
        f"verdicts: {html.escape(counts)}.</p>",
        "<h2>Figures</h2>", *(_image(f) for f in figures),
    ]
    if skipped:
        parts.append("<p>Not drawn:</p><ul>" + "".join(
            f"<li>{html.escape(s.family)}: {html.escape(s.reason)}</li>" for s in skipped) + "</ul>")
    parts += ["<h2>Cases and verdicts</h2>", f"<p>{html.escape(UNITS_NOTE)}</p>", verdict_table(run)]
    messages = [(c.nodeid, v) for c in ordered_cases(run) for v in c.verdicts
                if v.kind in NOTABLE_KINDS]
    for nodeid, verdict in messages:
        parts.append(f"<h3>{html.escape(verdict.kind)}: <code>{html.escape(nodeid)}</code> "
                     f"{html.escape(verdict.metric)}</h3><pre>{html.escape(verdict.message)}</pre>")
    parts += ["<h2>Machine</h2>", machine_table(run), "</body></html>"]
    path.write_text("\n".join(parts), encoding="utf-8")
    return path
