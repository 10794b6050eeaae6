"""Collective calls per step, in total and by kind: any change, fewer calls or more, is a regression in both gates
(the verdict names the kind); FLOPs are an exact count judged by the threshold."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from pytest_dmlbench.gates.gate import JudgedItem
from pytest_dmlbench.gates.paired.pairs import BlockPair
from pytest_dmlbench.gates.paired.single_reading import single_verdicts
from pytest_dmlbench.gates.paired.verdict_writer import VerdictWriter
from pytest_dmlbench.gates.stored.compare import CompareSettings, compare_case
from pytest_dmlbench.gates.thresholds import Thresholds
from pytest_dmlbench.results import MetricResult, Verdict
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
        assert "any change in the collective calls a step makes is a regression" in verdict.message


@pytest.mark.parametrize(("ref", "now", "kind"), [(4.0, 5.0, "regression"), (4.0, 3.0, "regression"),
                                                  (4.0, 4.0, "unchanged")])
def test_the_stored_gate_fails_any_change_in_collective_calls(ref: float, now: float, kind: str) -> None:
    base, current = make_case(seed=1), make_case(seed=2)
    base.add(MetricResult.of("collective_calls_per_step", [ref] * 20))
    current.add(MetricResult.of("collective_calls_per_step", [now] * 20))
    verdicts = {v.metric: v for v in compare_case(base, current, CompareSettings(min_runs=1), Thresholds(50.0))}
    assert verdicts["collective_calls_per_step"].kind == kind, verdicts["collective_calls_per_step"].message


def test_flops_fail_beyond_the_threshold_and_show_a_smaller_change() -> None:
    base, beyond, within = make_case(seed=1), make_case(seed=2), make_case(seed=3)
    base.add(MetricResult.of("flops_per_step", [1000.0] * 20))
    beyond.add(MetricResult.of("flops_per_step", [1150.0] * 20))
    within.add(MetricResult.of("flops_per_step", [1050.0] * 20))
    settings, thresholds = CompareSettings(min_runs=1), Thresholds(10.0)
    caught = {v.metric: v for v in compare_case(base, beyond, settings, thresholds)}["flops_per_step"]
    shown = {v.metric: v for v in compare_case(base, within, settings, thresholds)}["flops_per_step"]
    assert caught.kind == "regression" and "compared exactly" in caught.message
    assert shown.kind == "unchanged" and "differs by 5" in shown.message


ALL_REDUCE, BROADCAST = "collective_calls_per_step.all_reduce", "collective_calls_per_step.broadcast"


def _readings(**calls: float) -> dict[str, tuple[float, ...]]:
    """A block's call counts: ``all_reduce=2`` is two all_reduce calls a step; the total is their sum."""
    return {"collective_calls_per_step": (float(sum(calls.values())),),
            **{f"collective_calls_per_step.{kind}": (float(n),) for kind, n in calls.items()}}


def _paired(ref: dict[str, tuple[float, ...]], now: dict[str, tuple[float, ...]]) -> dict[str, Verdict]:
    pairs = [BlockPair(now, ref, a_first=True) for _ in range(4)]
    directed = {name: MetricResult.of(name, list(samples)) for name, samples in now.items()}
    return {v.metric: v for v in single_verdicts(VerdictWriter("main", "c0ffee" * 7), ITEM, directed, pairs, 50.0,
                                                 0.01, 0.01)}


def _stored(ref: dict[str, tuple[float, ...]], now: dict[str, tuple[float, ...]]) -> dict[str, Verdict]:
    base, current = make_case(seed=1), make_case(seed=2)
    for case, readings in ((base, ref), (current, now)):
        for name, samples in readings.items():
            case.add(MetricResult.of(name, list(samples) * 20))
    return {v.metric: v for v in compare_case(base, current, CompareSettings(min_runs=1), Thresholds(50.0))
            if v.metric.startswith("collective_calls_per_step")}  # the factory's case records timings too


@pytest.mark.parametrize("gate", [_paired, _stored], ids=["paired", "stored"])
def test_an_added_all_reduce_is_a_regression_named_by_its_kind(gate: Callable[..., dict[str, Verdict]]) -> None:
    verdicts = gate(_readings(all_reduce=1, broadcast=1), _readings(all_reduce=2, broadcast=1))
    added = verdicts[ALL_REDUCE]
    assert added.kind == "regression", added.message
    assert (added.baseline_median, added.current_median) == (1.0, 2.0)
    assert "any change in the all_reduce calls a step makes is a regression" in added.message
    assert verdicts[BROADCAST].kind == "unchanged", verdicts[BROADCAST].message  # the kind that did not change
    # negative control: the same calls of every kind read unchanged
    same = gate(_readings(all_reduce=1, broadcast=1), _readings(all_reduce=1, broadcast=1))
    assert {name: v.kind for name, v in same.items()} == dict.fromkeys(
        ["collective_calls_per_step", ALL_REDUCE, BROADCAST], "unchanged")


@pytest.mark.parametrize("gate", [_paired, _stored], ids=["paired", "stored"])
def test_a_kind_one_side_does_not_call_reads_zero_calls(gate: Callable[..., dict[str, Verdict]]) -> None:
    added = gate(_readings(all_reduce=1), _readings(all_reduce=1, broadcast=1))[BROADCAST]
    assert added.kind == "regression" and (added.baseline_median, added.current_median) == (0.0, 1.0), added.message
    gone = gate(_readings(all_reduce=1, broadcast=1), _readings(all_reduce=1))[BROADCAST]
    assert gone.kind == "regression" and (gone.baseline_median, gone.current_median) == (1.0, 0.0), gone.message


@pytest.mark.parametrize("gate", [_paired, _stored], ids=["paired", "stored"])
def test_a_reference_that_does_not_count_by_kind_gives_new(gate: Callable[..., dict[str, Verdict]]) -> None:
    # REF or a baseline recorded before calls were counted by kind: the total alone, its kinds unknown
    verdicts = gate({"collective_calls_per_step": (2.0,)}, _readings(all_reduce=2))
    assert verdicts[ALL_REDUCE].kind == "new", verdicts[ALL_REDUCE].message
    assert verdicts["collective_calls_per_step"].kind == "unchanged"  # the total is still judged
