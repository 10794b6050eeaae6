"""Each gate says how many rounds a case's own run measures; the plugin asks it rather than reading the options:
the stored gate judges the measurements' own rounds (one in a smoke run), the paired gate runs a short
calibration and measures its block pairs after it."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from pytest_dmlbench.config import DmlbenchConfig
from pytest_dmlbench.gates.paired.gate import PairedGate
from pytest_dmlbench.gates.stored.gate import StoredGate
from pytest_dmlbench.measure.rounds import CALIBRATION_BUDGET, SMOKE_BUDGET

SETTINGS = DmlbenchConfig(enabled=True, world_size=2, backend="gloo", timeout_s=60.0, threshold_pct=10.0,
                          save=False, compare=True, baseline_dir=Path("baselines"), json_path=None,
                          fail_on_improvement=False)


def test_the_stored_gate_judges_the_measurements_own_rounds_and_one_in_a_smoke_run() -> None:
    assert StoredGate(SETTINGS, {}).case_budget() is None
    smoke = StoredGate(replace(SETTINGS, smoke=True, compare=False), {}).case_budget()
    assert smoke is SMOKE_BUDGET and smoke.rounds == 1 and smoke.smoke


def test_the_paired_gate_asks_for_a_calibration_run() -> None:
    gate = object.__new__(PairedGate)  # the budget depends on no REF: none is started for this question
    budget = gate.case_budget()
    assert budget is CALIBRATION_BUDGET and budget.rounds == 10 and not budget.smoke
