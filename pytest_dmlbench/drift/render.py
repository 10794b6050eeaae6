"""The drift findings as terminal text, GitHub markdown and a section of ``report.html``."""

from __future__ import annotations

import html
import re
from pathlib import Path

from pytest_dmlbench.drift.findings import DriftReport, SeriesFinding
from pytest_dmlbench.errors import DmlbenchError
from pytest_dmlbench.results.jsonio import write_atomic

SECTION_BEGIN = "<!-- dmlbench-drift: begin -->"
SECTION_END = "<!-- dmlbench-drift: end -->"
KIND_WORDS = {"regression": "step regression", "creep": "creep", "step": "step (below the threshold)",
              "improvement": "improvement"}


def headline(report: DriftReport) -> str:
    """One sentence: how many nights and series were judged and what was found."""
    nights = report.nights
    span = f"{nights[0].label} to {nights[-1].label}" if nights else "no nights"
    regressions = len(report.regressions)
    others = len(report.findings) - regressions
    found = (f"{regressions} regression(s) (steps or creep of at least {report.settings.threshold_pct:g} %)"
             if regressions else f"no step or creep of at least {report.settings.threshold_pct:g} %")
    short = f"; {report.too_short} with fewer than {report.settings.min_nights} nights not judged" \
        if report.too_short else ""
    machine = (f" (on machine {nights[-1].machine}; {report.other_machine} night(s) of other machines left out)"
               if report.other_machine else "")
    return (f"drift over {len(nights)} night(s){machine}, {span}: {report.judged} case-metric(s) judged{short}; "
            f"{found}" + (f"; {others} other step(s)" if others else ""))


def describe(item: SeriesFinding) -> str:
    """One finding in words, with the commit range to read."""
    finding = item.finding
    change = finding.change_pct
    direction = "worse" if change > 0 else "better"
    over = f" over {finding.steps} steps" if finding.steps > 1 else ""
    return (f"{KIND_WORDS[finding.kind]}: {item.case} {item.metric} {abs(change):.1f} % {direction}{over} "
            f"between {item.before.label} and {item.after.label} (git log {item.commits}; "
            f"night-to-night noise {100 * item.noise:.1f} %)")


def text(report: DriftReport) -> str:
    lines = [headline(report)]
    lines += [f"  {describe(item)}" for item in report.findings]
    return "\n".join(lines)


def markdown(report: DriftReport) -> str:
    lines = ["## Drift across nights", "", headline(report), ""]
    if report.findings:
        lines += ["| finding | case | metric | change | nights | commits |", "|---|---|---|---|---|---|"]
        for item in report.findings:
            f = item.finding
            cells = [KIND_WORDS[f.kind], f"`{item.case}`", item.metric, f"{f.change_pct:+.1f} %",
                     f"{item.before.label} to {item.after.label}", f"`{item.commits}`"]
            lines.append("| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |")
        lines.append("")
    return "\n".join(lines)


def html_section(report: DriftReport) -> str:
    """The section for ``report.html`` (between markers, so a later run replaces it)."""
    rows = "".join(
        f'<tr class="{"regression" if item.finding.regression else ""}">'
        f"<td>{html.escape(KIND_WORDS[item.finding.kind])}</td><td><code>{html.escape(item.case)}</code></td><td>{html.escape(item.metric)}</td>"
        f'<td class="num">{item.finding.change_pct:+.1f} %</td><td>{html.escape(item.before.label)} to '
        f"{html.escape(item.after.label)}</td><td><code>{html.escape(item.commits)}</code></td></tr>"
        for item in report.findings)
    table = ("<table><tr><th>finding</th><th>case</th><th>metric</th><th>change</th><th>nights</th>"
             f"<th>commits</th></tr>{rows}</table>") if rows else ""
    return (f'{SECTION_BEGIN}<section id="drift"><h2>Drift across nights</h2><p>{html.escape(headline(report))}</p>'
            f"{table}</section>{SECTION_END}")


def insert_into_report(path: Path, report: DriftReport) -> None:
    """Put the drift section into an existing ``report.html`` (before its figures), replacing an earlier one."""
    try:
        page = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise DmlbenchError(f"{path}: cannot read the report to add the drift section to ({exc}). Write it first "
                            "(`pytest ... --dmlbench-plots DIR` or `python -m pytest_dmlbench plot RESULTS --out DIR`)"
                            ) from exc
    page = re.sub(re.escape(SECTION_BEGIN) + ".*?" + re.escape(SECTION_END), "", page, flags=re.DOTALL)
    section = html_section(report)
    for anchor in ("<h2>Figures</h2>", "</body>"):
        if anchor in page:
            page = page.replace(anchor, section + "\n" + anchor, 1)
            break
    else:
        raise DmlbenchError(f"{path}: not a pytest-dmlbench report (no figures heading, no </body>); "
                            "give the report.html the plugin or `plot` wrote")
    write_atomic(path, page)
