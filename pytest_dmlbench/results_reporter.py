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


class ResultsReporter:
    """A pytest plugin object: collects ``CaseResult`` dicts from reports, reports them at the end."""

    def __init__(self, config: pytest.Config, settings: DmlbenchConfig, run: dict[str, Any]) -> None:
        self.config = config
        self.settings = settings
        self.run = run
        self.cases: list[CaseResult] = []

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        data = getattr(report, REPORT_ATTR, None)
        if data is not None and report.when == "call":
            self.cases.append(CaseResult.from_dict(data))

    def results(self) -> RunResults:
        from pytest_dmlbench.baseline.fingerprint import machine_fingerprint

        backends = sorted({c.backend for c in self.cases if c.backend != "local"}) or ["gloo"]
        return RunResults(
            machine=machine_fingerprint(backends[0]),
            created=datetime.now(timezone.utc).isoformat(timespec="seconds"),
            run=dict(self.run),
            cases=sorted(self.cases, key=lambda c: c.nodeid),
        )

    @pytest.hookimpl(trylast=True)
    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        if hasattr(self.config, "workerinput") or not self.cases:
            return
        from pytest_dmlbench.results.report import append_step_summary, write_results
        from pytest_dmlbench.results.table_layout import terminal_table

        results = self.results()
        terminalreporter.section("dmlbench")
        width = self.config.get_terminal_writer().fullwidth
        terminalreporter.write_line(terminal_table(results, verbose=self.config.get_verbosity() > 0, width=width))
        if self.settings.json_path is not None:
            if any(case.verdicts for case in results.cases):
                from pytest_dmlbench.results.settled import settled_record

                results.run["settled"] = settled_record(results)
            write_results(self.settings.json_path, results)
            terminalreporter.write_line(f"dmlbench: results written to {self.settings.json_path}")
        summary = append_step_summary(results)
        if summary is not None:
            terminalreporter.write_line(f"dmlbench: job summary appended to {summary}")
        if self.settings.save:
            terminalreporter.write_line(f"dmlbench: baselines saved under {self.settings.baseline_dir}")
        if self.settings.plots_dir is not None:
            from pytest_dmlbench.plots.session import write_run_plots

            terminalreporter.write_line(write_run_plots(
                results, self.settings.plots_dir, self.settings.baseline_dir, self.settings.save))
