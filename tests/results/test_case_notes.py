"""A case's notes reach the reader: counted under the terminal table, each under its case with ``-v``, in the job
summary and in ``report.html`` (before, they were in the results file only)."""

from __future__ import annotations

from pytest_dmlbench.gates.computing_share import waiting_note
from pytest_dmlbench.plots.html import verdict_table
from pytest_dmlbench.results import RunResults
from pytest_dmlbench.results.case_notes import case_notes, note_lead, notes_count_text
from pytest_dmlbench.results.report import markdown_summary, terminal_table
from tests.results.casefactory import make_case, make_run

DIFFER = ("work counters differ between ranks (calls and bytes are recorded as the mean over ranks, so that a change "
          "on any rank moves them; FLOPs as the sum): "
          "comm_bytes_per_step: 4096 on rank 0, 8192 on rank 1")


def _noted() -> RunResults:
    napping, differing, plain = (make_case(f"bench_cases/test_x.py::test_{name}", seed=i)
                                 for i, name in enumerate(("nap", "differ", "plain")))
    napping.extra["notes"] = [waiting_note(0.04)]
    differing.extra["notes"] = [waiting_note(0.1), DIFFER, DIFFER]  # a note made twice is shown once
    return make_run([napping, differing, plain])


def test_notes_are_counted_under_the_table_and_printed_under_their_case_with_v() -> None:
    results = _noted()
    assert note_lead(waiting_note(0.04)) == "CPU time not judged"
    assert note_lead(DIFFER) == "work counters differ between ranks"
    assert case_notes(results.cases[1]) == [waiting_note(0.1), DIFFER]
    compact = terminal_table(results, width=140)
    assert ("notes on 2 case(s): CPU time not judged (2), work counters differ between ranks (1); -v prints each "
            "under its case") in compact
    verbose = terminal_table(results, verbose=True, width=240).splitlines()
    at = next(i for i, line in enumerate(verbose) if line.startswith("test_x.py::test_differ"))
    block = "\n".join(verbose[at: next(i for i, line in enumerate(verbose) if line.startswith("test_x.py::test_nap"))])
    assert "    note: CPU time not judged: the step mostly waits (its ranks computed 10%" in block
    assert f"    note: {DIFFER}" in block and block.count("note: work counters differ") == 1
    assert "notes on" not in "\n".join(verbose)  # -v prints each note, so no count
    # a long note wraps to the width, indented under its note
    narrow = terminal_table(results, verbose=True, width=60).splitlines()
    assert all(len(line) <= 60 for line in narrow)
    assert "    note: CPU time not judged: the step mostly waits (its" in narrow


def test_the_job_summary_and_report_html_print_each_note_under_its_case() -> None:
    results = _noted()
    summary = markdown_summary(results)
    assert "### notes" in summary
    assert f"- `bench_cases/test_x.py::test_differ`: {DIFFER}" in summary
    assert summary.count("CPU time not judged") == 2
    table = verdict_table(results)
    assert f'<tr class="note"><td></td><td colspan="8">note: {DIFFER}</td></tr>' in table
    assert table.count('<tr class="note">') == 3


def test_negative_control_a_run_without_notes_shows_none() -> None:
    results = make_run([make_case("bench_cases/test_x.py::test_plain")])
    assert notes_count_text(results) is None
    assert "note" not in terminal_table(results, verbose=True, width=120).replace("notable", "")
    assert "### notes" not in markdown_summary(results)
    assert 'class="note"' not in verdict_table(results)
