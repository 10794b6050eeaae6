"""A run stopped before its end (Ctrl-C, ``pytest.exit``) says so first and gives no run-level result.

pytest still writes its summaries after a KeyboardInterrupt. Without a word, the gate's block counts,
run-level statement and watch list and the table's verdict counts would read like a finished run's result.
:class:`InterruptionWatch` marks the run's facts ``interrupted`` (the results table then leaves its counts
out, and the results file records it), and opens the summary with what stopped the run and how many cases
had finished; the plugin leaves the gate's summary out.
"""

from __future__ import annotations

from typing import Any

import pytest

from pytest_dmlbench.results.table import INTERRUPTED_KEY
from pytest_dmlbench.results.table_layout import INDENT, wrap_text


def interruption_line(what: str, finished: int, collected: int) -> str:
    """The first line of an interrupted run's summary."""
    return (f"dmlbench: INTERRUPTED ({what}) after {finished} of {collected} case(s): the run has no result, "
            "no verdict on the run and no counts; the lines and rows below are only the cases that finished "
            "before it")


class InterruptionWatch:
    """A pytest plugin object: records an interruption in the run facts ``run`` and says so first."""

    def __init__(self, run: dict[str, Any]) -> None:
        self.run = run
        self.finished = 0
        self.collected = 0

    def pytest_collection_finish(self, session: pytest.Session) -> None:
        self.collected = len(session.items)

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if report.when == "call" or (report.when == "setup" and not report.passed):
            self.finished += 1

    def pytest_keyboard_interrupt(self, excinfo: pytest.ExceptionInfo[BaseException]) -> None:
        message = getattr(excinfo.value, "msg", None)  # pytest.exit's reason
        self.run[INTERRUPTED_KEY] = f"pytest.exit: {message}" if message else excinfo.typename

    @pytest.hookimpl(tryfirst=True)
    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        what = self.run.get(INTERRUPTED_KEY)
        if what:
            width = terminalreporter.config.get_terminal_writer().fullwidth
            for line in wrap_text(interruption_line(str(what), self.finished, self.collected), width, INDENT):
                terminalreporter.write_line(line, red=True, bold=True)
