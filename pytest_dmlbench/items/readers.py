"""What the plugin reads off a pytest item once its case ran: the case's facts (node id, parameters, world,
scaling family), the item as the gate judges it, the options that reproduce its run, and the record the results
file keeps of it whatever its outcome."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from pytest_dmlbench.config import SCALING_ARG, CpuThreshold, DmlbenchConfig
from pytest_dmlbench.gates.gate import JudgedItem
from pytest_dmlbench.items.case import callspec_params, records_in_process
from pytest_dmlbench.items.case_results import CaseFacts, Scaling, params_of
from pytest_dmlbench.items.stash_keys import BACKEND_KEY, CONFIG_KEY, SETTINGS_KEY
from pytest_dmlbench.results import CaseResult


def case_facts(item: pytest.Function, world_size: int, backend: str, threshold_pct: float | None,
               cpu_threshold_pct: CpuThreshold | None = None) -> CaseFacts:
    """The facts of ``item``'s case that its result records (its scaling family when ``scaling=True``); a
    threshold the marker left unset is the per-case thresholds file's where it lists the case."""
    settings = item.config.stash.get(CONFIG_KEY, None)
    if settings is not None:
        listed = settings.case_thresholds.of(item.nodeid)
        threshold_pct = listed.threshold_pct if threshold_pct is None else threshold_pct
        cpu_threshold_pct = listed.cpu_threshold_pct if cpu_threshold_pct is None else cpu_threshold_pct
    params = callspec_params(item)
    scaling = None
    if SCALING_ARG in params:
        others = sorted((k, repr(v)) for k, v in params.items() if k != SCALING_ARG)
        scaling = Scaling(f"{item.path}::{item.originalname}{others}", int(params[SCALING_ARG]))
    described = getattr(item, "dmlbench_params", None)  # experiment items describe themselves
    return CaseFacts(item.nodeid, params_of(params if described is None else described), world_size, backend,
                     threshold_pct, scaling, cpu_threshold_pct)


def run_options(settings: DmlbenchConfig, world_size: int, backend: str) -> tuple[str, ...]:
    """The options that reproduce an item's run, for the commands its verdicts print."""
    options = ["--world-size", str(world_size), "--dmlbench-backend", backend]
    if settings.launcher != "fork":
        options += ["--dmlbench-launcher", settings.launcher]
    if settings.isolation != "persistent":
        options += ["--dmlbench-isolation", settings.isolation]
    if settings.ray_spread:
        options.append("--dmlbench-ray-spread")
    return tuple(options)


def judged_item(item: pytest.Function, result: CaseResult, in_process: bool) -> JudgedItem:
    """``item`` as the gate judges it; ``in_process``: the figures were recorded in this process
    (``dmlbench_metrics``), not on ranks."""
    settings = item.config.stash[CONFIG_KEY]
    case = item.stash.get(SETTINGS_KEY, None)
    budget = case.pair_budget_s if case is not None else getattr(item, "dmlbench_pair_budget", None)
    scaling = case_facts(item, result.world_size, result.backend, result.threshold_pct).scaling
    return JudgedItem(item.nodeid, Path(item.path), case.timeout_s if case is not None else settings.timeout_s,
                      run_options(settings, result.world_size, result.backend), in_process, budget,
                      scaling.family if scaling is not None else None, scaling.world_size if scaling else 0)


def case_record(item: pytest.Item) -> dict[str, Any] | None:
    """What the results file records of a case whatever its outcome (figures or none, failed or skipped): a
    case result without figures, for a dmlbench case or a test that records figures in this process."""
    if not isinstance(item, pytest.Function) or not (SETTINGS_KEY in item.stash or records_in_process(item)):
        return None
    case = item.stash.get(SETTINGS_KEY, None)
    if case is not None:
        world_size, backend = case.world_size, item.stash.get(BACKEND_KEY, case.backend)
    else:
        world_size, backend, _ = getattr(item, "dmlbench_local_run", (1, "local", None))
    facts = case_facts(item, world_size, backend, None)
    return CaseResult(facts.nodeid, facts.params, world_size, backend).to_dict()
