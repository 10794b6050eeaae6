"""Collective calls per step: any change, fewer calls or more, is a regression in both gates; FLOPs are an
exact count judged by the threshold."""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_dmlbench.gates.gate import JudgedItem
from pytest_dmlbench.gates.paired.pairs import BlockPair
from pytest_dmlbench.gates.paired.single_reading import single_verdicts
from pytest_dmlbench.gates.paired.verdict_writer import VerdictWriter
from pytest_dmlbench.gates.stored.compare import CompareSettings, compare_case
from pytest_dmlbench.results import MetricResult
from tests.results.casefactory import make_case

ITEM = JudgedItem("t.py::test_step", Path("t.py"), 60.0, run_options=("--world-size", "2"))


@pytest.mark.parametrize(("ref", "now", "kind"), [(4.0, 5.0, "regression"), (4.0, 3.0, "regression"),
                                                  (4.0, 4.0, "unchanged")])
def test_the_paired_gate_fails_any_change_in_collective_calls(ref: float, now: float, kind: str) -> None:
    pairs = [BlockPair({"collective_calls_per_step": (now,)}, {"collective_calls_per_step": (ref,)}, a_first=True)
             for _ in range(4)]
    metric = MetricResult.of("collective_calls_per_step", [now])
    (verdict,) = single_verdicts(VerdictWriter("main", "c0ffee" * 7), ITEM, {metric.name: metric}, pairs, 50.0,
                                 0.01, 0.01)
    assert verdict.kind == kind, verdict.message
    if kind == "regression":
        assert "any change in the calls a step makes is a regression" in verdict.message


@pytest.mark.parametrize(("ref", "now", "kind"), [(4.0, 5.0, "regression"), (4.0, 3.0, "regression"),
                                                  (4.0, 4.0, "unchanged")])
def test_the_stored_gate_fails_any_change_in_collective_calls(ref: float, now: float, kind: str) -> None:
    base, current = make_case(seed=1), make_case(seed=2)
    base.add(MetricResult.of("collective_calls_per_step", [ref] * 20))
    current.add(MetricResult.of("collective_calls_per_step", [now] * 20))
    verdicts = {v.metric: v for v in compare_case(base, current, CompareSettings(threshold_pct=50.0, min_runs=1))}
    assert verdicts["collective_calls_per_step"].kind == kind, verdicts["collective_calls_per_step"].message


def test_flops_fail_beyond_the_threshold_and_show_a_smaller_change() -> None:
    base, beyond, within = make_case(seed=1), make_case(seed=2), make_case(seed=3)
    base.add(MetricResult.of("flops_per_step", [1000.0] * 20))
    beyond.add(MetricResult.of("flops_per_step", [1150.0] * 20))
    within.add(MetricResult.of("flops_per_step", [1050.0] * 20))
    settings = CompareSettings(threshold_pct=10.0, min_runs=1)
    caught = {v.metric: v for v in compare_case(base, beyond, settings)}["flops_per_step"]
    shown = {v.metric: v for v in compare_case(base, within, settings)}["flops_per_step"]
    assert caught.kind == "regression" and "compared exactly" in caught.message
    assert shown.kind == "unchanged" and "differs by 5" in shown.message
