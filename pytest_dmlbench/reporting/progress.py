"""Live progress: each case's headline figure as the case finishes, and a sign of life within the paired
gate's block pairs.

A case's line is printed where pytest reports (the xdist controller, or the only process) once pytest has
written the case's own outcome, through pytest's terminal reporter: colours only on a terminal, plain text
in a CI log, never wider than the terminal (an id too long for it is broken at natural points, as the table
breaks it). pytest's row of result letters is ended with its progress (``[ 42%]``) before the line, so
every row keeps its percentage. A line names the case's file only when it differs from the file the
previous line named, so a file's cases name it once. The paired gate calls :meth:`LiveProgress.pairs_done` after
each block pair; a line saying how many pairs are done is printed at most every :data:`PAIRS_EVERY_S`
seconds, so a case of a minute of pairs prints a few lines, not one per pair.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import pytest

from pytest_dmlbench.pytest_internals import finish_progress_row, output_uncaptured, start_rows_afresh
from pytest_dmlbench.reporting.results_reporter import REPORT_ATTR
from pytest_dmlbench.results import CaseResult, Verdict
from pytest_dmlbench.results.table import headline_metric, metric_cells, verdict_cell
from pytest_dmlbench.results.table_layout import INDENT, id_lines, wrap_text

PAIRS_EVERY_S = 10.0
LEAD = "dmlbench"
_MARKUP: dict[str, dict[str, bool]] = {
    "regression": {"red": True, "bold": True},
    "improvement": {"green": True},
    "inconclusive": {"yellow": True},
}


def case_summary(case: CaseResult) -> tuple[str, Verdict | None]:
    """``test_x.py::test_y[ddp]: throughput_samples_per_s 920 samples/s (IQR 25, 20 rounds)``, with, when
    the case was judged, its headline's verdict and change and the block pairs it rested on; and that
    verdict."""
    text, verdict = _figures(case)
    return f"{case.nodeid}: {text}", verdict


def _figures(case: CaseResult) -> tuple[str, Verdict | None]:
    headline = headline_metric(case)
    if headline is None:
        return "no figures", None
    verdict = next((v for v in case.verdicts if v.metric == headline.name), None)
    cells = metric_cells(headline, verdict)
    spread = f"IQR {cells.iqr.removesuffix(' ' + headline.unit)}, " if cells.iqr else ""
    text = f"{headline.name} {cells.median} ({spread}{cells.rounds} round(s))"
    if verdict is not None:
        text += f"; {verdict_cell(verdict, compact=True)}" + (f" {verdict.change}" if verdict.change else "")
        others = [v for v in case.verdicts if v is not verdict and v.kind == "regression"]
        if others:
            text += f" (also REGRESSION: {', '.join(v.metric for v in others)})"
    paired = case.extra.get("paired")
    if isinstance(paired, dict):
        stages = "+".join(str(n) for n in paired.get("pairs_per_stage", [])) or "0"
        text += f"; block pairs {stages} in {float(paired.get('seconds', 0.0)):.0f} s"
    return text, verdict


def live_lines(name: str, text: str, width: int) -> list[str]:
    """``dmlbench NAME: TEXT`` in lines of at most ``width`` characters: the text wrapped, its continuation
    lines indented; an id that does not fit beside ``dmlbench`` broken at natural points (``::``, ``[``,
    ``-``) on lines of its own, the text below it."""
    head = f"{LEAD} {name}:"
    if len(head) <= width:
        return wrap_text(f"{head} {text}", width, INDENT)
    return [*id_lines(head, width), *wrap_text(INDENT + text, width, INDENT)]


class LiveProgress:
    """A pytest plugin object: prints each case's line as it finishes and the gate's pairs as they go."""

    def __init__(self, config: pytest.Config, every_s: float = PAIRS_EVERY_S,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.config = config
        self.every_s = every_s
        self.clock = clock
        self.pending: dict[str, tuple[str, Verdict | None]] = {}
        self.started: dict[str, float] = {}
        self.said: dict[str, float] = {}
        self.named_file: str | None = None
        self.session: pytest.Session | None = None
        self.row_ended = False  # a line of ours ended pytest's row of result letters
        self.row_file: str | None = None  # the file of the item started last
        self.deferred: list[tuple[str, str, Verdict | None]] = []

    def pytest_sessionstart(self, session: pytest.Session) -> None:
        self.session = session

    def _name(self, nodeid: str) -> str:
        """The node id, without its file when the previous line named the same file."""
        file, sep, rest = nodeid.partition("::")
        if sep and file == self.named_file:
            return rest
        self.named_file = file if sep else None
        return nodeid

    def _write(self, nodeid: str, text: str, verdict: Verdict | None = None) -> None:
        reporter = self.config.pluginmanager.get_plugin("terminalreporter")
        if reporter is None:
            return
        writer = self.config.get_terminal_writer()
        if writer.width_of_current_line and self._last_item(reporter):
            self.deferred.append((nodeid, text, verdict))  # pytest ends the last row with [100%] after the loop
            return
        if writer.width_of_current_line:
            finish_progress_row(reporter)
        self._print(writer, nodeid, text, verdict)
        self.row_ended = True

    def _print(self, writer: Any, nodeid: str, text: str, verdict: Verdict | None) -> None:
        if writer.width_of_current_line:
            writer.line()
        markup = _MARKUP.get(verdict.kind, {}) if verdict is not None else {}
        for line in live_lines(self._name(nodeid), text, writer.fullwidth):
            writer.line(line, **markup)

    @pytest.hookimpl(wrapper=True, tryfirst=True)
    def pytest_runtestloop(self, session: pytest.Session) -> Any:
        """The last case's line after pytest ended the last row (with [100%]) once the loop is over."""
        try:
            return (yield)
        finally:
            for nodeid, text, verdict in self.deferred:
                self._print(self.config.get_terminal_writer(), nodeid, text, verdict)
            self.deferred.clear()

    @pytest.hookimpl(trylast=True)
    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        data = getattr(report, REPORT_ATTR, None)
        if data is not None and report.when == "call":
            self.pending[report.nodeid] = _figures(CaseResult.from_dict(data))

    @pytest.hookimpl(trylast=True)
    def pytest_runtest_logfinish(self, nodeid: str, location: Any) -> None:
        """After pytest wrote the case's outcome (and its progress percentage)."""
        self.started.pop(nodeid, None)
        self.said.pop(nodeid, None)
        summary = self.pending.pop(nodeid, None)
        if summary is not None:
            self._write(nodeid, *summary)

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_logstart(self, nodeid: str, location: Any) -> None:
        """Before pytest starts the item's row: a new file's row after a line of ours needs no percentage
        (the line's row had it), which pytest would otherwise write alone on a line."""
        self.started[nodeid] = self.clock()
        reporter = self.config.pluginmanager.get_plugin("terminalreporter")
        file = nodeid.split("::", 1)[0]
        if self.row_ended and file != self.row_file and reporter is not None:
            start_rows_afresh(reporter)
        self.row_ended, self.row_file = False, file

    def _last_item(self, reporter: Any) -> bool:
        """Every collected item's outcome written: pytest ends that row with [100%] itself after the run."""
        collected = self.session.testscollected if self.session is not None else 0
        return bool(collected) and reporter.reported_progress >= collected

    def pairs_done(self, nodeid: str, pairs: int) -> None:
        """The paired gate's report after each block pair of ``nodeid`` (``pairs`` so far in this case)."""
        now = self.clock()
        start = self.started.setdefault(nodeid, now)
        if now - self.said.get(nodeid, start) < self.every_s:
            return
        self.said[nodeid] = now
        # during the case's call, where pytest captures output: written to its capture, the line would be lost
        # and pytest's count of the row's width reset, so that its row later ran past the terminal's width
        with output_uncaptured(self.config):
            self._write(nodeid, f"{pairs} block pair{'' if pairs == 1 else 's'} so far, {now - start:.0f} s")


def register(config: pytest.Config, gate: object) -> None:
    """Print progress where pytest reports: not on an xdist worker, whose terminal nobody sees (there the
    controller prints each case's line from its report; the pairs' progress is not shown)."""
    if hasattr(config, "workerinput"):
        return
    progress = LiveProgress(config)
    config.pluginmanager.register(progress, "dmlbench-progress")
    if hasattr(gate, "on_pair"):
        gate.on_pair = progress.pairs_done
