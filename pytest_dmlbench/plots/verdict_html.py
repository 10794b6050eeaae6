"""The top of ``report.html``: a summary banner, the list of notable verdicts (regressions, then
inconclusive ones, then improvements, one line each) and their full messages, wrapped to the page."""

from __future__ import annotations

import html
from datetime import datetime

from pytest_dmlbench.results import RunResults, Verdict
from pytest_dmlbench.results.figures import labelled
from pytest_dmlbench.results.settled import settled_text
from pytest_dmlbench.results.table import inconclusive_counts, ordered_cases, verdict_counts

NOTABLE_ORDER = ("regression", "inconclusive", "improvement")
"""The order the report lists notable verdicts in: what needs action first."""
LISTED = 10
"""At most this many lines of one kind other than regression are listed open; the rest are folded."""


def notable(run: RunResults) -> list[tuple[str, Verdict]]:
    """(node id, verdict) of every notable verdict, in :data:`NOTABLE_ORDER`, then by case."""
    found = [(case.nodeid, v) for case in ordered_cases(run) for v in case.verdicts if v.kind in NOTABLE_ORDER]
    return sorted(found, key=lambda item: NOTABLE_ORDER.index(item[1].kind))


def _when(created: str) -> str:
    try:
        return datetime.fromisoformat(created).strftime("%Y-%m-%d %H:%M UTC")
    except ValueError:
        return created or "an unknown time"


def headline(run: RunResults) -> tuple[str, str]:
    """(CSS class, sentence) of the banner: the worst outcome first."""
    kinds = [v.kind for case in run.cases for v in case.verdicts]
    regressed = sorted({case.nodeid for case in run.cases for v in case.verdicts if v.kind == "regression"})
    failed = [case for case in run.cases if case.outcome not in ("passed", "skipped")]
    if regressed:
        return "bad", f"{len(regressed)} case(s) regressed"
    if failed:
        return "bad", f"{len(failed)} case(s) did not pass"
    if "inconclusive" in kinds:
        untestable, unsettled = inconclusive_counts(v for case in run.cases for v in case.verdicts)
        return "warn", (f"no regression; {kinds.count('inconclusive')} figure(s) inconclusive: {untestable} "
                        f"untestable (no test could run), {unsettled} unsettled (tested, not settled)")
    if kinds:
        return "good", "no regression"
    return "none", "not compared with a baseline: no verdicts"


def paired_reference(run: RunResults) -> str | None:
    """The REF a paired run (``--dmlbench-against``) compared its cases with, as the gate named it; None
    when no case of the run was judged in pairs."""
    refs = sorted({str(paired.get("ref") or "REF") for case in run.cases
                   if isinstance(paired := case.extra.get("paired"), dict)})
    return ", ".join(refs) if refs else None


def comparison_text(run: RunResults) -> str:
    """What the run's verdicts compared with: REF re-measured beside the working tree in a paired run, else
    the stored baselines (empty when nothing was compared)."""
    ref = paired_reference(run)
    if ref is not None:
        return (f"Compared with: REF {ref}, re-measured beside the working tree in this run (block pairs); "
                "stored baselines, where listed, are history for the trend only")
    if any(case.verdicts for case in run.cases):
        return "Compared with: the stored baselines"
    return ""


def banner(sources: list[str], run: RunResults) -> str:
    """The summary banner: the verdict in one sentence, the counts, which run this is and what it was compared
    with (REF in a paired run, never the stored-baselines folder)."""
    css, sentence = headline(run)
    commit = str(run.run.get("commit") or "")[:12]
    facts = [f"{len(run.cases)} case(s)", f"world size {run.run['world_size']}" if "world_size" in run.run else "",
             f"commit {commit}" if commit else "", f"created {_when(run.created)}"]
    counts = "; ".join(t for t in (verdict_counts(run), settled_text(run)) if t)
    return (f'<div class="banner {css}" role="status"><p class="headline">{html.escape(sentence)}</p>'
            + (f"<p>{html.escape(counts)}</p>" if counts else "")
            + f"<p>{html.escape('; '.join(f for f in facts if f))}. Results: "
            + ", ".join(f"<code>{html.escape(s)}</code>" for s in sources) + "</p>"
            + (f"<p>{html.escape(compared)}.</p>" if (compared := comparison_text(run)) else "") + "</div>")


def _line(index: int, nodeid: str, v: Verdict) -> str:
    return (f'<li class="{v.kind}"><span class="kind">{html.escape(v.kind)}</span> '
            f'<a href="#v{index}"><code>{html.escape(nodeid)}</code></a> {html.escape(labelled(v.metric))}'
            + (f": {html.escape(v.change)}" if v.change else "") + "</li>")


def _message(index: int, nodeid: str, v: Verdict) -> str:
    return (f'<section class="verdict {v.kind}" id="v{index}"><h3>{html.escape(v.kind)}: '
            f"<code>{html.escape(nodeid)}</code> {html.escape(labelled(v.metric))}</h3>"
            f'<div class="message">{html.escape(v.message)}</div></section>')


def verdict_list(run: RunResults) -> str:
    """One line per notable verdict (kind, case, metric, change), then the messages in full: every
    regression's open, the others' folded. Past :data:`LISTED` lines of one other kind, the rest fold too."""
    items = list(enumerate(notable(run)))
    if not items:
        return ""
    shown, folded = [], []
    for kind in NOTABLE_ORDER:
        of_kind = [item for item in items if item[1][1].kind == kind]
        keep = len(of_kind) if kind == "regression" else LISTED
        shown += of_kind[:keep]
        folded += of_kind[keep:]
    parts = ['<h2 id="verdicts">Regressions and other notable verdicts</h2>',
             '<ul class="notable">' + "".join(_line(i, n, v) for i, (n, v) in shown) + "</ul>"]
    if folded:
        parts.append(f"<details><summary>{len(folded)} more notable verdict(s)</summary><ul class=\"notable\">"
                     + "".join(_line(i, n, v) for i, (n, v) in folded) + "</ul></details>")
    parts += [_message(i, n, v) for i, (n, v) in items if v.kind == "regression"]
    others = [(i, n, v) for i, (n, v) in items if v.kind != "regression"]
    if others:
        parts.append(f"<details><summary>the messages of {len(others)} other notable verdict(s)</summary>"
                     + "".join(_message(i, n, v) for i, n, v in others) + "</details>")
    return "".join(parts)
