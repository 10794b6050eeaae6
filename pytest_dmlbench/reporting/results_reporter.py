"""Gathers every case's results where reports arrive (the xdist controller, or the only process) and
writes the run's reports at the end: terminal table, results JSON, GitHub job summary."""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any

import pytest

from pytest_dmlbench.config import DmlbenchConfig
from pytest_dmlbench.results import CaseResult, RunResults

# The attribute of a TestReport that carries the case's result (a dict, so it crosses xdist's channel).
REPORT_ATTR = "dmlbench_result"
# The attribute of every report of a case (a dmlbench case, or a test that records figures in the pytest
# process) that carries the case without its figures, so the results file holds every case with its outcome.
CASE_ATTR = "dmlbench_case"


def phase_outcome(report: pytest.TestReport, before: str | None) -> str | None:
    """A case's outcome after one more of its reports: its call's (passed, failed, skipped), ``skipped`` when
    its set-up skipped it, ``error`` when its set-up or tear-down failed; ``before`` is the outcome so far."""
    if report.when == "call":
        return report.outcome
    if report.failed:
        return "error"
    if report.skipped and report.when == "setup":
        return "skipped"
    return before


class ResultsReporter:
    """A pytest plugin object: collects ``CaseResult`` dicts from reports, reports them at the end."""

    def __init__(self, config: pytest.Config, settings: DmlbenchConfig, run: dict[str, Any]) -> None:
        self.config = config
        self.settings = settings
        self.run = run
        self.cases: list[CaseResult] = []
        self.outcomes: dict[str, tuple[dict[str, Any], str | None]] = {}  # every case, figures or not
        self.session: pytest.Session | None = None

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        data = getattr(report, REPORT_ATTR, None)
        if data is not None and report.when == "call":
            self.cases.append(CaseResult.from_dict(data))
        case = getattr(report, CASE_ATTR, None)
        if case is not None:
            before = self.outcomes.get(report.nodeid, (case, None))[1]
            self.outcomes[report.nodeid] = (case, phase_outcome(report, before))

    def results(self, every_case: bool = False) -> RunResults:
        """The cases that recorded figures; with ``every_case``, every other case too, with its outcome and no
        figures (what the results file holds)."""
        from pytest_dmlbench.baseline.fingerprint import machine_fingerprint

        cases = list(self.cases)
        if every_case:
            recorded = {case.nodeid for case in cases}
            for nodeid, (case, outcome) in self.outcomes.items():
                if nodeid not in recorded and outcome is not None:
                    cases.append(CaseResult.from_dict({**case, "outcome": outcome}))
        backends = sorted({c.backend for c in cases if c.backend != "local"}) or ["gloo"]
        return RunResults(
            machine=machine_fingerprint(backends[0]),
            created=datetime.now(timezone.utc).isoformat(timespec="seconds"),
            run=dict(self.run),
            cases=sorted(cases, key=lambda c: c.nodeid),
        )

    def _write_json(self, terminalreporter: Any) -> None:
        """The results file: every case of the run with its outcome, with or without figures."""
        from pytest_dmlbench.results.report import write_results

        assert self.settings.json_path is not None
        results = self.results(every_case=True)
        if any(case.verdicts for case in results.cases):
            from pytest_dmlbench.results.settled import settled_record

            results.run["settled"] = settled_record(results)
        try:
            write_results(self.settings.json_path, results)
        except OSError as exc:  # checked at start-up; a disk that filled or a folder removed since
            self._lost(terminalreporter, f"the results were not written to {self.settings.json_path} "
                       f"({exc.strerror or exc})")
            return
        terminalreporter.write_line(f"dmlbench: results written to {self.settings.json_path}")

    def _lost(self, terminalreporter: Any, text: str) -> None:
        """Say that an output of the run is lost, and fail the run that would have passed."""
        terminalreporter.write_line(f"dmlbench: ERROR {text}", red=True)
        if self.session is not None and self.session.exitstatus == pytest.ExitCode.OK:
            self.session.exitstatus = pytest.ExitCode.TESTS_FAILED

    def pytest_sessionstart(self, session: pytest.Session) -> None:
        self.session = session

    @pytest.hookimpl(trylast=True)
    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        if hasattr(self.config, "workerinput"):
            return
        if not self.cases:
            if self.settings.json_path is not None:
                self._write_json(terminalreporter)
            return
        from pytest_dmlbench.results.report import append_step_summary
        from pytest_dmlbench.results.table_layout import terminal_table

        results = self.results()
        terminalreporter.section("dmlbench")
        width = self.config.get_terminal_writer().fullwidth
        terminalreporter.write_line(terminal_table(results, verbose=self.config.get_verbosity() > 0, width=width))
        if self.settings.json_path is not None:
            self._write_json(terminalreporter)
        summary = append_step_summary(results)
        if summary is not None:
            terminalreporter.write_line(f"dmlbench: job summary appended to {summary}")
        if self.settings.save:
            terminalreporter.write_line(f"dmlbench: baselines saved under {self.settings.baseline_dir}")
        if self.settings.plots_dir is not None:
            from pytest_dmlbench.plots.session import write_run_plots

            try:
                line = write_run_plots(results, self.settings.plots_dir, self.settings.baseline_dir, self.settings.save)
            except OSError as exc:  # checked at start-up; a disk that filled or a folder removed since
                self._lost(terminalreporter, f"the plots were not written to {self.settings.plots_dir} "
                           f"({exc.strerror or exc})")
                return
            terminalreporter.write_line(line)
