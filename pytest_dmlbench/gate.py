"""The baseline gate: after a case body ran, save or compare its figures; a regression fails the item.

Failing inside the call phase (not after the session, as pytest-benchmark does) makes the regression a
failed test in the terminal, in JUnit XML and under xdist.
"""

from __future__ import annotations

from collections.abc import Generator
from typing import Any

import pytest

from pytest_dmlbench.baseline.session import BaselineOptions, BaselineSession
from pytest_dmlbench.collector import run_facts
from pytest_dmlbench.config import SCALING_ARG, DmlbenchConfig
from pytest_dmlbench.recording import case_result, params_of
from pytest_dmlbench.results import CaseResult, MetricResult


class BaselineGate:
    """A pytest plugin object; one per process (controller or xdist worker)."""

    def __init__(self, config: pytest.Config, settings: DmlbenchConfig, result_key: pytest.StashKey[Any],
                 local_key: pytest.StashKey[Any]) -> None:
        self.config = config
        self.settings = settings
        self.result_key = result_key
        self.local_key = local_key
        self._single_rank: dict[str, float] = {}
        self.baselines = BaselineSession(BaselineOptions(
            root=settings.baseline_dir, save=settings.save, compare=settings.compare,
            threshold_pct=settings.threshold_pct, fail_on_improvement=settings.fail_on_improvement,
        ))

    def _add_scaling(self, item: pytest.Function, case: CaseResult) -> None:
        """``speedup`` and ``scaling_efficiency`` of a ``scaling=True`` case against its ws1 variant.

        Per-round samples: throughput(N) of each round / median throughput(1), so the figures can be
        compared with baselines like any other. The ws1 variant must have run in this process first
        (it does, unless xdist sent it to another worker; then a note says so).
        """
        callspec = getattr(item, "callspec", None)
        if callspec is None or SCALING_ARG not in callspec.params:
            return
        throughput = case.metrics.get("throughput_samples_per_s")
        if throughput is None:
            return
        world_size = int(callspec.params[SCALING_ARG])
        key = item.nodeid.replace(f"ws{world_size}", "ws*")
        if world_size == 1:
            self._single_rank[key] = throughput.stats.median
            return
        single = self._single_rank.get(key)
        if single is None or not single > 0:
            case.extra.setdefault("notes", []).append(
                "speedup not computed: the ws1 variant of this case did not run in this process first")
            return
        speedup = [t / single for t in throughput.samples]
        case.add(MetricResult.of("speedup", speedup))
        case.add(MetricResult.of("scaling_efficiency", [s / world_size for s in speedup]))

    def _finished_case(self, item: pytest.Function) -> Any:
        local = item.stash.get(self.local_key, None)
        if local is not None and local.metrics and self.result_key not in item.stash:
            callspec = getattr(item, "callspec", None)
            item.stash[self.result_key] = case_result(
                item.nodeid, params_of(callspec.params if callspec is not None else {}), 1, "local",
                local.metrics, None,
            )
        return item.stash.get(self.result_key, None)

    @pytest.hookimpl(wrapper=True)
    def pytest_pyfunc_call(self, pyfuncitem: pytest.Function) -> Generator[None, Any, Any]:
        outcome = yield
        case = self._finished_case(pyfuncitem)
        if case is not None:
            self._add_scaling(pyfuncitem, case)
            from pytest_dmlbench.baseline.compare import failure_report
            from pytest_dmlbench.errors import BaselineError

            try:
                failing = self.baselines.process(case, run_facts(self.config, self.settings))
            except BaselineError as exc:
                pytest.fail(str(exc), pytrace=False)
            if failing:
                pytest.fail(failure_report(failing), pytrace=False)
        return outcome
