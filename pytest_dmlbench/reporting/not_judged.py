"""Validations that could not judge their target: reported as such, listed and counted, never a silent pass.

A case body raises :class:`~pytest_dmlbench.errors.NotJudged` when its measurement is too uncertain to
tell a pass from a miss. The item is then skipped with the reason ``not judged: ...`` (failed under
``--dmlbench-fail-on-inconclusive``; not under ``--dmlbench-fail-on-untestable``: a validation that ran and
could not settle is unsettled, not untestable), and the run's summary lists every such item under its own heading.
The reason travels in the report's user properties, so the list is complete under pytest-xdist too.
"""

from __future__ import annotations

import pytest

PROPERTY = "dmlbench_not_judged"


def report_not_judged(item: pytest.Item, reason: str, *, fail: bool) -> None:
    """End ``item`` as not judged: skipped with the reason, or failed when the run asks for it."""
    item.user_properties.append((PROPERTY, reason))
    if fail:
        pytest.fail(f"not judged, and --dmlbench-fail-on-inconclusive is set: {reason}", pytrace=False)
    pytest.skip(f"not judged: {reason}")


class NotJudgedLedger:
    """Collects the items that were not judged and prints them at the end of the run."""

    def __init__(self) -> None:
        self.items: list[tuple[str, str]] = []

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if report.when != "call":  # every phase's report carries the item's user properties
            return
        self.items += [(report.nodeid, str(value)) for name, value in report.user_properties if name == PROPERTY]

    def pytest_terminal_summary(self, terminalreporter: pytest.TerminalReporter) -> None:
        if not self.items:
            return
        count = len(self.items)
        terminalreporter.section(f"dmlbench: {count} validation{'s' if count != 1 else ''} not judged")
        for nodeid, reason in self.items:
            terminalreporter.write_line(f"{nodeid}: {reason}")
        terminalreporter.write_line("(each ran but could not tell a pass from a miss; "
                                    "--dmlbench-fail-on-inconclusive fails them)")
