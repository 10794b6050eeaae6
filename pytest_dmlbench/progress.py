"""Live progress: each case's headline figure as the case finishes, and a sign of life within the paired
gate's block pairs.

A case's line is printed where pytest reports (the xdist controller, or the only process) once pytest has
written the case's own outcome, through pytest's terminal reporter: colours only on a terminal, plain text
in a CI log, never wider than the terminal. The paired gate calls :meth:`LiveProgress.pairs_done` after
each block pair; a line saying how many pairs are done is printed at most every :data:`PAIRS_EVERY_S`
seconds, so a case of a minute of pairs prints a few lines, not one per pair.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import pytest

from pytest_dmlbench.results import CaseResult, Verdict
from pytest_dmlbench.results.table import headline_metric, metric_cells, verdict_cell
from pytest_dmlbench.results.table_layout import INDENT, wrap_text
from pytest_dmlbench.results_reporter import REPORT_ATTR

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
    headline = headline_metric(case)
    if headline is None:
        return f"{case.nodeid}: no figures", None
    verdict = next((v for v in case.verdicts if v.metric == headline.name), None)
    cells = metric_cells(headline, verdict)
    spread = f"IQR {cells.iqr.removesuffix(' ' + headline.unit)}, " if cells.iqr else ""
    text = f"{case.nodeid}: {headline.name} {cells.median} ({spread}{cells.rounds} round(s))"
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

    def _write(self, text: str, verdict: Verdict | None = None) -> None:
        reporter = self.config.pluginmanager.get_plugin("terminalreporter")
        if reporter is None:
            return
        writer = self.config.get_terminal_writer()
        reporter.ensure_newline()
        if writer.width_of_current_line:  # xdist's letters, which the reporter does not track
            writer.line()
        markup = _MARKUP.get(verdict.kind, {}) if verdict is not None else {}
        for line in wrap_text(f"{LEAD} {text}", writer.fullwidth, INDENT):
            writer.line(line, **markup)

    @pytest.hookimpl(trylast=True)
    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        data = getattr(report, REPORT_ATTR, None)
        if data is not None and report.when == "call":
            self.pending[report.nodeid] = case_summary(CaseResult.from_dict(data))

    @pytest.hookimpl(trylast=True)
    def pytest_runtest_logfinish(self, nodeid: str, location: Any) -> None:
        """After pytest wrote the case's outcome (and its progress percentage)."""
        self.started.pop(nodeid, None)
        self.said.pop(nodeid, None)
        summary = self.pending.pop(nodeid, None)
        if summary is not None:
            self._write(*summary)

    def pytest_runtest_logstart(self, nodeid: str, location: Any) -> None:
        self.started[nodeid] = self.clock()

    def pairs_done(self, nodeid: str, pairs: int) -> None:
        """The paired gate's report after each block pair of ``nodeid`` (``pairs`` so far in this case)."""
        now = self.clock()
        start = self.started.setdefault(nodeid, now)
        if now - self.said.get(nodeid, start) < self.every_s:
            return
        self.said[nodeid] = now
        self._write(f"{nodeid}: {pairs} block pairs so far, {now - start:.0f} s")


def register(config: pytest.Config, gate: object) -> None:
    """Print progress where pytest reports: not on an xdist worker, whose terminal nobody sees (there the
    controller prints each case's line from its report; the pairs' progress is not shown)."""
    if hasattr(config, "workerinput"):
        return
    progress = LiveProgress(config)
    config.pluginmanager.register(progress, "dmlbench-progress")
    if hasattr(gate, "on_pair"):
        gate.on_pair = progress.pairs_done
