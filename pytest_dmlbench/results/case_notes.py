"""A case's notes (``extra.notes`` in the results file) as the reports show them.

A note says what a case's figures do not: a figure left unjudged and why (CPU time on a step that mostly waits),
a figure not recorded (counters the measurement could not count, CPU time a platform cannot read), counters that
differ between ranks, a baseline replaced. The terminal table counts them under the one-line-per-case table and
prints each under its case with ``-v``; the job summary and ``report.html`` print each under its case.
"""

from __future__ import annotations

import re
from collections import Counter

from pytest_dmlbench.results import CaseResult, RunResults
from pytest_dmlbench.results.table import ordered_cases

NOTES_KEY = "notes"
LEAD_CHARS = 60
_LEAD_END = re.compile(r"[:;(]|\. ")


def case_notes(case: CaseResult) -> list[str]:
    """The case's notes, in the order they were made, each once."""
    notes = case.extra.get(NOTES_KEY)
    if not isinstance(notes, list):
        return []
    return list(dict.fromkeys(str(note) for note in notes))


def note_lead(note: str) -> str:
    """A note's opening words, up to its first colon, semicolon, bracket or sentence end (``CPU time not
    judged``), at most :data:`LEAD_CHARS` characters."""
    lead = _LEAD_END.split(note, maxsplit=1)[0].strip()
    return lead if len(lead) <= LEAD_CHARS else lead[: LEAD_CHARS - 3].rstrip() + "..."


def notes_count_text(results: RunResults) -> str | None:
    """One line for the one-line-per-case table: how many cases carry notes, by the notes' opening words
    (``notes on 3 case(s): CPU time not judged (2), ...``); None when no case has one."""
    noted = [case for case in ordered_cases(results) if case_notes(case)]
    if not noted:
        return None
    leads = Counter(note_lead(note) for case in noted for note in case_notes(case))
    kinds = ", ".join(f"{lead} ({count})" for lead, count in leads.items())
    return f"notes on {len(noted)} case(s): {kinds}; -v prints each under its case"
