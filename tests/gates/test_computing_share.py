"""The default CPU threshold judges CPU time only on steps that compute; a threshold given judges every step."""

from __future__ import annotations

import random

import pytest

from pytest_dmlbench.gates.computing_share import MIN_COMPUTING_SHARE, computing_share
from pytest_dmlbench.gates.stored.compare import CompareSettings, compare_case
from pytest_dmlbench.gates.thresholds import Thresholds
from pytest_dmlbench.results import CaseResult, MetricResult
from pytest_dmlbench.world.run_facts import RunFacts

DEFAULT = Thresholds(10.0, 10.0, cpu_where_computing=True, cores=2)  # the plugin's default, on 2 cores
GIVEN = Thresholds(10.0, 10.0, cores=2)  # --dmlbench-cpu-threshold 10


def step(wall_s: float, cpu_s: float, seed: int, world_size: int = 4, rounds: int = 20) -> CaseResult:
    """A case whose step takes ``wall_s`` and whose ranks spend ``cpu_s`` of CPU on it in all, 1 % noise."""
    rng = random.Random(seed)
    case = CaseResult("t.py::test_step", {}, world_size, "gloo")
    case.add(MetricResult.of("step_time_s", [wall_s * rng.gauss(1, 0.01) for _ in range(rounds)]))
    case.add(MetricResult.of("cpu_time_s", [cpu_s * rng.gauss(1, 0.01) for _ in range(rounds)]))
    return case


def cpu_verdict(baseline: CaseResult, current: CaseResult, thresholds: Thresholds) -> str | None:
    verdicts = {v.metric: v.kind for v in compare_case(baseline, current, CompareSettings(min_runs=1), thresholds)}
    return verdicts.get("cpu_time_s")


def test_the_share_is_cpu_time_over_the_core_time_the_ranks_had() -> None:
    # 4 ranks on 2 cores, each on the CPU the whole 10 ms step: 20 ms of CPU in all, every core busy
    assert computing_share(step(0.010, 0.020, 0).metrics, 4, 2) == pytest.approx(1.0, rel=0.05)
    # the same ranks asleep for 9 ms of it
    assert computing_share(step(0.010, 0.002, 0).metrics, 4, 2) == pytest.approx(0.1, rel=0.05)
    assert computing_share(step(0.010, 0.010, 0).metrics, 1, 2) == pytest.approx(1.0, rel=0.05)  # one rank, one core
    assert computing_share({"step_time_s": MetricResult.of("step_time_s", [0.01])}, 2, 2) is None  # no CPU figure


def test_the_default_judges_a_computing_step_and_leaves_a_waiting_one_with_a_note() -> None:
    computing, more_work = step(0.010, 0.020, 1), step(0.0105, 0.024, 2)  # 20 % more CPU a step
    assert DEFAULT.waiting_note(more_work) is None
    assert cpu_verdict(computing, more_work, DEFAULT) == "regression"
    waiting, more_waiting_work = step(0.010, 0.002, 3), step(0.010, 0.0024, 4)  # the same 20 %, on a napping step
    note = DEFAULT.waiting_note(more_waiting_work)
    assert note is not None and "CPU time not judged: the step mostly waits" in note and "computed 12%" in note, note
    assert cpu_verdict(waiting, more_waiting_work, DEFAULT) is None
    # negative control: a threshold given judges the waiting step too, and finds the change
    assert GIVEN.waiting_note(more_waiting_work) is None
    assert cpu_verdict(waiting, more_waiting_work, GIVEN) == "regression"
    # a case's own threshold (marker or per-case file) judges it as well, and "off" leaves it unjudged
    more_waiting_work.cpu_threshold_pct = 10.0
    assert DEFAULT.waiting_note(more_waiting_work) is None
    assert cpu_verdict(waiting, more_waiting_work, DEFAULT) == "regression"
    more_waiting_work.cpu_threshold_pct = "off"
    assert cpu_verdict(waiting, more_waiting_work, DEFAULT) is None


def test_the_boundary_is_a_quarter_of_the_core_time() -> None:
    assert MIN_COMPUTING_SHARE == 0.25
    assert DEFAULT.waiting_note(step(0.010, 0.020 * (MIN_COMPUTING_SHARE + 0.05), 5)) is None
    assert DEFAULT.waiting_note(step(0.010, 0.020 * (MIN_COMPUTING_SHARE - 0.05), 6)) is not None


def test_ranks_share_the_cores_among_xdist_workers() -> None:
    here = RunFacts.here(None)  # under xdist (the test command) this worker's share
    assert here.cores_per_world() == max(1, here.cores // here.workers) >= 1
    assert RunFacts(cores=8, workers=2).cores_per_world() == 4 and RunFacts(cores=2, workers=4).cores_per_world() == 1
    assert RunFacts.recorded({"cores": 8, "xdist_workers": 2}) == RunFacts(cores=8, workers=2)
    assert RunFacts.recorded({"cores": 2, "xdist_workers": 0}) == RunFacts(cores=2, workers=1)
    assert RunFacts.recorded({"world_size": 4}) is None  # a file that does not say: this machine's
