"""``report.html``, in one file that opens from disk without a server: a summary banner and the notable
verdicts first (what a reader must act on fits the first screen), then every figure embedded as base64 PNG,
the table of every figure's verdict and the machine."""

from __future__ import annotations

import base64
import html
from collections.abc import Sequence
from pathlib import Path

from pytest_dmlbench.plots.figure import Figure, Skipped
from pytest_dmlbench.plots.machine_html import machine_table
from pytest_dmlbench.plots.verdict_html import banner, verdict_list
from pytest_dmlbench.results import RunResults
from pytest_dmlbench.results.case_notes import case_notes
from pytest_dmlbench.results.table import UNITS_NOTE, change_cell, metric_cells, ordered_cases, verdict_cell

STYLE = """
body { font-family: sans-serif; margin: 1.5em 2em; max-width: 1100px; }
h1 { margin: 0 0 0.4em; font-size: 1.5em; }
table { border-collapse: collapse; font-size: 0.9em; }
td, th { border: 1px solid #ccc; padding: 2px 6px; text-align: left; vertical-align: top; }
td.num { text-align: right; white-space: nowrap; }
tr.regression td { background: #fdd; } tr.improvement td { background: #dfd; }
tr.inconclusive td { background: #fec; } tr.note td { color: #444; font-size: 0.9em; }
figure { margin: 1.5em 0; } figcaption { color: #444; font-size: 0.9em; }
img { max-width: 100%; height: auto; }
code { overflow-wrap: anywhere; }
.banner { border-left: 8px solid #888; background: #f4f4f4; padding: 0.4em 1em; margin-bottom: 1em; }
.banner p { margin: 0.3em 0; } .banner .headline { font-size: 1.3em; font-weight: bold; }
.banner.bad { border-color: #c00; background: #fee; } .banner.warn { border-color: #d80; background: #fff4e0; }
.banner.good { border-color: #080; background: #efe; }
ul.notable { padding-left: 1.2em; } ul.notable li { margin: 0.2em 0; }
.kind { font-weight: bold; text-transform: uppercase; font-size: 0.85em; }
li.regression .kind, section.regression h3 { color: #b00; } li.inconclusive .kind { color: #a60; }
li.improvement .kind { color: #070; }
section.verdict h3 { font-size: 1em; margin: 1em 0 0.3em; }
.message { white-space: pre-wrap; overflow-wrap: anywhere; font-family: monospace; font-size: 0.85em;
           background: #f7f7f7; border: 1px solid #ddd; padding: 0.5em; }
table.machine th { font-weight: normal; color: #444; }
"""


def _image(figure: Figure) -> str:
    data = base64.b64encode(figure.path.read_bytes()).decode("ascii")
    return (f'<figure><img alt="{html.escape(figure.title)}" data-file="{html.escape(figure.path.name)}" '
            f'src="data:image/png;base64,{data}"><figcaption>{html.escape(figure.title)}: '
            f"{html.escape(figure.caption)}</figcaption></figure>")


def verdict_table(run: RunResults) -> str:
    """Every metric of every case with median, IQR, baseline, change and verdict; the case's notes under them."""
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
        rows += [f'<tr class="note"><td></td><td colspan="8">note: {html.escape(note)}</td></tr>'
                 for note in case_notes(case)]
    return "<table>" + "\n".join(rows) + "</table>"


def write_html(path: Path, sources: Sequence[str], runs: Sequence[RunResults], figures: Sequence[Figure],
               skipped: Sequence[Skipped]) -> Path:
    """Write the report; the banner, verdicts and machine are the latest run's."""
    run = runs[-1]
    parts = [
        "<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        "<title>pytest-dmlbench report</title>", f"<style>{STYLE}</style></head><body>",
        "<h1>pytest-dmlbench report</h1>", banner(list(sources), run), verdict_list(run),
        "<h2>Figures</h2>", *(_image(f) for f in figures),
    ]
    if skipped:
        parts.append("<p>Not drawn:</p><ul>" + "".join(
            f"<li>{html.escape(s.family)}: {html.escape(s.reason)}</li>" for s in skipped) + "</ul>")
    parts += ["<h2>Cases and verdicts</h2>", f"<p>{html.escape(UNITS_NOTE)}</p>", verdict_table(run),
              "<h2>Machine</h2>", machine_table(run.machine), "</body></html>"]
    path.write_text("\n".join(parts), encoding="utf-8")
    return path
