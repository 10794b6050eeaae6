"""The baseline gate: save or compare a finished case's figures; say why the item fails, if it does.

The plugin asks the gate during the item's call phase (not after the session, as pytest-benchmark does),
so a regression is a failed test in the terminal, in JUnit XML and under xdist. Imports no pytest.
"""

from __future__ import annotations

from typing import Any

from pytest_dmlbench.baseline.compare import failure_report
from pytest_dmlbench.baseline.keeper import BaselineKeeper, BaselineOptions
from pytest_dmlbench.config import DmlbenchConfig
from pytest_dmlbench.errors import BaselineError
from pytest_dmlbench.results import CaseResult


class BaselineGate:
    """One per process (controller or xdist worker)."""

    def __init__(self, settings: DmlbenchConfig, run: dict[str, Any]) -> None:
        self.run = run
        self.keeper = BaselineKeeper(BaselineOptions(
            root=settings.baseline_dir, save=settings.save, compare=settings.compare,
            threshold_pct=settings.threshold_pct, fail_on_improvement=settings.fail_on_improvement,
        ))

    def judge(self, case: CaseResult) -> str | None:
        """Save or compare ``case`` (its verdicts are set); the failure message when the item must fail."""
        try:
            failing = self.keeper.process(case, self.run)
        except BaselineError as exc:
            return str(exc)
        return failure_report(failing) if failing else None
