"""Gathers every case's results where reports arrive (the xdist controller, or the only process)."""

from __future__ import annotations

import os
from datetime import datetime, timezone
from typing import Any

import pytest

from pytest_dmlbench.config import DmlbenchConfig
from pytest_dmlbench.results import CaseResult, RunResults

REPORT_ATTR = "dmlbench_result"


def is_xdist_worker(config: pytest.Config) -> bool:
    return hasattr(config, "workerinput")


class ResultsCollector:
    """A pytest plugin object: collects ``CaseResult`` dicts from reports, writes them at the end."""

    def __init__(self, config: pytest.Config, settings: DmlbenchConfig) -> None:
        self.config = config
        self.settings = settings
        self.cases: list[CaseResult] = []

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        data = getattr(report, REPORT_ATTR, None)
        if data is not None and report.when == "call":
            self.cases.append(CaseResult.from_dict(data))

    def run_facts(self) -> dict[str, Any]:
        numprocesses = getattr(self.config.option, "numprocesses", None)
        workers = numprocesses if isinstance(numprocesses, int) and numprocesses > 0 else 1
        cores = os.cpu_count() or 1
        return {
            "world_size": self.settings.world_size,
            "xdist_workers": workers,
            "cores": cores,
            "oversubscribed": self.settings.world_size * workers > cores,
            "threshold_pct": self.settings.threshold_pct,
        }

    def results(self) -> RunResults:
        from pytest_dmlbench.baseline.fingerprint import machine_fingerprint

        return RunResults(
            machine=machine_fingerprint(),
            created=datetime.now(timezone.utc).isoformat(timespec="seconds"),
            run=self.run_facts(),
            cases=sorted(self.cases, key=lambda c: c.nodeid),
        )
