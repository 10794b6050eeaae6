"""The stored gate: judge a finished case against the figures earlier runs saved (``--dmlbench-save``).

The rule is :mod:`pytest_dmlbench.gates.stored.compare`; the files, their identity and their history are the
keeper's (:mod:`pytest_dmlbench.gates.stored.keeper`). ``--dmlbench-save`` stores and judges nothing. Imports
no pytest.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from pytest_dmlbench.baseline.identity import CASE_ISOLATION
from pytest_dmlbench.config import DmlbenchConfig
from pytest_dmlbench.errors import BaselineError
from pytest_dmlbench.gates.gate import GateDecision, JudgedItem
from pytest_dmlbench.gates.stored.keeper import BaselineKeeper
from pytest_dmlbench.measure.rounds import SMOKE_BUDGET, BlockBudget
from pytest_dmlbench.results import CaseResult


class StoredGate:
    """One per pytest process (controller or xdist worker)."""

    def __init__(self, settings: DmlbenchConfig, run: dict[str, Any]) -> None:
        self.run = run
        self.smoke = settings.smoke
        self.keeper = BaselineKeeper(settings)

    def case_budget(self) -> BlockBudget | None:
        """The measurements' defaults, whose rounds are judged; a smoke run's single round."""
        return SMOKE_BUDGET if self.smoke else None

    def judge(self, item: JudgedItem, result: CaseResult) -> GateDecision:
        """Save or compare ``result`` through a shallow copy that takes the keeper's verdicts and notes (the
        keeper never changes a case's metrics); an unusable baseline file is the item's problem."""
        own = {CASE_ISOLATION: result.extra[CASE_ISOLATION]} if CASE_ISOLATION in result.extra else {}
        case = replace(result, verdicts=[], extra=own)
        try:
            self.keeper.process(case, self.run)
        except BaselineError as exc:
            return GateDecision(problem=str(exc))
        return GateDecision(case.verdicts, notes=list(case.extra.get("notes", [])))

    def collected(self, items: Sequence[tuple[str, Path]], measuring: int) -> None:
        """Nothing to prepare: baseline files are read as cases finish."""

    def ready(self) -> None:
        """Nothing to wait for."""

    def summary_lines(self) -> list[str]:
        return []

    def finishing(self) -> None:
        """Nothing slow to release."""

    def close(self) -> None:
        """Nothing to release: every save is complete when it returns."""
