"""Gathers every case's results where reports arrive (the xdist controller, or the only process) and
writes the run's reports at the end: terminal table, results JSON, GitHub job summary."""

from __future__ import annotations

import os
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pytest

from pytest_dmlbench.config import DmlbenchConfig, xdist_worker_count
from pytest_dmlbench.results import CaseResult, RunResults

REPORT_ATTR = "dmlbench_result"


def workers_of(config: pytest.Config) -> int:
    """xdist workers sharing this machine in this run."""
    return xdist_worker_count(getattr(config.option, "numprocesses", None), os.environ, os.cpu_count() or 1)


def run_facts(config: pytest.Config, settings: DmlbenchConfig) -> dict[str, Any]:
    """What a run's figures depend on beyond the machine: world size, xdist workers, cores."""
    from pytest_dmlbench.baseline.commit import head_commit

    workers = workers_of(config)
    cores = os.cpu_count() or 1
    facts: dict[str, Any] = {
        "world_size": settings.world_size,
        "xdist_workers": workers,
        "cores": cores,
        "oversubscribed": settings.world_size * workers > cores,
        "threshold_pct": settings.threshold_pct,
    }
    commit = head_commit(Path(config.rootpath))
    if commit is not None:
        facts["commit"] = commit  # what --dmlbench-against baseline re-measures
    return facts


class ResultsCollector:
    """A pytest plugin object: collects ``CaseResult`` dicts from reports, reports them at the end."""

    def __init__(self, config: pytest.Config, settings: DmlbenchConfig) -> None:
        self.config = config
        self.settings = settings
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
            run=run_facts(self.config, self.settings),
            cases=sorted(self.cases, key=lambda c: c.nodeid),
        )

    @pytest.hookimpl(trylast=True)
    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        if hasattr(self.config, "workerinput") or not self.cases:
            return
        from pytest_dmlbench.report import append_step_summary, terminal_table, write_results

        results = self.results()
        terminalreporter.section("dmlbench")
        terminalreporter.write_line(terminal_table(results))
        if self.settings.json_path is not None:
            write_results(self.settings.json_path, results)
            terminalreporter.write_line(f"dmlbench: results written to {self.settings.json_path}")
        summary = append_step_summary(results)
        if summary is not None:
            terminalreporter.write_line(f"dmlbench: job summary appended to {summary}")
        if self.settings.save:
            terminalreporter.write_line(f"dmlbench: baselines saved under {self.settings.baseline_dir}")
