"""CPU time per step is judged at a threshold of its own by both gates: one given judges every step, the
default only steps that compute (``tests/gates/test_computing_share.py``)."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from pytest_dmlbench.config import case_settings
from pytest_dmlbench.errors import ConfigError
from pytest_dmlbench.gates.gate import JudgedItem
from pytest_dmlbench.gates.paired.pairs import BlockPair, ListSource
from pytest_dmlbench.gates.paired.stage import CaseJudgement
from pytest_dmlbench.gates.paired.statistics import SequentialRule
from pytest_dmlbench.gates.paired.trial import Trial
from pytest_dmlbench.gates.paired.verdict_writer import VerdictWriter
from pytest_dmlbench.gates.run_level import RunLevelRule
from pytest_dmlbench.gates.stored.compare import CompareSettings, compare_case
from pytest_dmlbench.gates.thresholds import Thresholds
from pytest_dmlbench.results import CaseResult, MetricResult, Verdict
from tests.results.casefactory import make_case

ITEM = JudgedItem("t.py::test_step", Path("t.py"), 60.0, run_options=("--world-size", "2"))


def _pairs(work: float, wait: float, n: int = 120, seed: int = 0) -> list[BlockPair]:
    """Pairs of a 10 ms step on a shared machine: wall time moves with the pair's phase (up to 25 % apart) and
    8 % noise a block; CPU time (4 ms of work) only with 1 % noise. A does ``work`` more work and waits
    ``wait`` seconds more a step."""
    rng = random.Random(seed)
    pairs = []
    for i in range(n):
        phase = rng.uniform(0.8, 1.25)

        def side(more_work: float, more_wait: float) -> dict[str, tuple[float, ...]]:
            cpu = [0.004 * (1 + more_work) * rng.gauss(1, 0.01) for _ in range(5)]
            wall = [(c + 0.006) * phase * rng.gauss(1, 0.08) + more_wait for c in cpu]  # noqa: B023
            return {"step_time_s": tuple(wall), "cpu_time_s": tuple(cpu)}

        pairs.append(BlockPair(side(work, wait), side(0.0, 0.0), a_first=i % 2 == 0))
    return pairs


def _judge(pairs: list[BlockPair], threshold: float | Thresholds) -> dict[str, Verdict]:
    trial = Trial(VerdictWriter("main", "c0ffee" * 7), RunLevelRule(0.01, 1), SequentialRule())
    directed = {"step_time_s": MetricResult.of("step_time_s", [0.01]),
                "cpu_time_s": MetricResult.of("cpu_time_s", [0.004])}
    judgement = CaseJudgement(ITEM.nodeid)
    source = ListSource(pairs, seconds_per_pair=1.0)
    verdicts = trial.judge_case(ITEM, directed, {n: "s" for n in directed}, threshold, source, judgement,
                                source.now())
    return {v.metric: v for v in verdicts}


def test_five_percent_more_work_is_caught_by_cpu_time_at_its_own_threshold_and_not_at_the_wall_threshold() -> None:
    caught = _judge(_pairs(work=0.05, wait=0.0), Thresholds(10.0, 2.5))
    assert caught["cpu_time_s"].kind == "regression", caught["cpu_time_s"].message
    assert "threshold 2.5 %" in caught["cpu_time_s"].message
    assert caught["step_time_s"].kind != "regression"  # 2 % of wall time, lost in its noise
    # negative control: the same pairs with one threshold for every figure do not catch it
    missed = _judge(_pairs(work=0.05, wait=0.0), 10.0)
    assert missed["cpu_time_s"].kind != "regression", missed["cpu_time_s"].message


def test_a_wait_is_seen_by_wall_time_and_not_by_cpu_time() -> None:
    verdicts = _judge(_pairs(work=0.0, wait=0.01), Thresholds(10.0, 2.5))
    assert verdicts["step_time_s"].kind == "regression", verdicts["step_time_s"].message
    assert verdicts["cpu_time_s"].kind == "unchanged", verdicts["cpu_time_s"].message


def _with_cpu(case: CaseResult, cpu_s: float, rounds: int = 20) -> CaseResult:
    rng = random.Random(int(cpu_s * 1e6))
    case.add(MetricResult.of("cpu_time_s", [cpu_s * rng.gauss(1, 0.002) for _ in range(rounds)]))
    return case


def test_the_stored_gate_judges_cpu_time_only_at_a_cpu_threshold() -> None:
    base = _with_cpu(make_case(seed=1), 0.004)
    current = _with_cpu(make_case(seed=2), 0.0042)  # 5 % more CPU a step
    unjudged = compare_case(base, current, CompareSettings(min_runs=1), Thresholds(10.0))
    assert "cpu_time_s" not in {v.metric for v in unjudged}  # recorded, not judged, without a CPU threshold
    judged = {v.metric: v for v in compare_case(base, current, CompareSettings(min_runs=1), Thresholds(10.0, 2.5))}
    assert judged["cpu_time_s"].kind == "regression", judged["cpu_time_s"].message
    assert judged["cpu_time_s"].threshold_pct == 2.5 and judged["step_time_s"].threshold_pct == 10.0
    current.cpu_threshold_pct = 8.0  # the marker's cpu_threshold= beats the run's
    own = {v.metric: v for v in compare_case(base, current, CompareSettings(min_runs=1), Thresholds(10.0, 2.5))}
    assert own["cpu_time_s"].kind != "regression" and own["cpu_time_s"].threshold_pct == 8.0
    current.cpu_threshold_pct = "off"  # a case's "off" leaves its CPU time unjudged at any run threshold
    off = {v.metric: v for v in compare_case(base, current, CompareSettings(min_runs=1), Thresholds(10.0, 2.5))}
    assert "cpu_time_s" not in off and "step_time_s" in off


def test_thresholds_name_the_figure_they_apply_to() -> None:
    both = Thresholds(10.0, 2.5)
    assert (both.of("step_time_s"), both.of("cpu_time_s"), both.judges("cpu_time_s")) == (10.0, 2.5, True)
    assert not Thresholds(10.0).judges("cpu_time_s") and Thresholds(10.0).judges("step_time_s")


def test_a_bad_cpu_threshold_is_named_with_its_case() -> None:
    from pytest_dmlbench.config import DmlbenchConfig

    defaults = DmlbenchConfig(enabled=True, world_size=2, backend="gloo", timeout_s=60.0, threshold_pct=10.0,
                              save=False, compare=False, baseline_dir=Path("."), json_path=None,
                              fail_on_improvement=False)
    assert case_settings({"cpu_threshold": "3%"}, defaults, "t.py::a").cpu_threshold_pct == 3.0
    assert case_settings({"cpu_threshold": "Off"}, defaults, "t.py::a").cpu_threshold_pct == "off"
    with pytest.raises(ConfigError, match=r"t.py::b: cpu_threshold=.*percentage.*or off to leave CPU time unjudged"):
        case_settings({"cpu_threshold": "fast"}, defaults, "t.py::b")


def _recording(path: Path, run_cpu: float | str | None) -> Path:
    import json

    rng = random.Random(3)
    a = {"step_time_s": [0.01 * rng.gauss(1, 0.02) for _ in range(8)],
         "cpu_time_s": [0.004 * 1.05 * rng.gauss(1, 0.005) for _ in range(8)]}
    b = {"step_time_s": [0.01 * rng.gauss(1, 0.02) for _ in range(8)],
         "cpu_time_s": [0.004 * rng.gauss(1, 0.005) for _ in range(8)]}
    case = {"nodeid": "t.py::test_step", "world_size": 2,
            "metrics": {name: {"unit": "s", "better": "lower"} for name in ("step_time_s", "cpu_time_s")},
            "extra": {"paired": {"block_medians": [{"a_first": [True] * 8, "a": a, "b": b}], "seconds": 8.0}}}
    path.write_text(json.dumps({"run": {"threshold_pct": 10, "cpu_threshold_pct": run_cpu}, "cases": [case]}))
    return path


def test_a_replay_judges_cpu_time_as_the_recorded_run_did(tmp_path: Path) -> None:
    from pytest_dmlbench.gates.paired.recorded import load_recorded
    from pytest_dmlbench.gates.replay import Replay

    judged = load_recorded([_recording(tmp_path / "judged.json", 2.5)])["t.py::test_step"]
    assert judged.cpu_threshold_pct == 2.5 and "cpu_time_s" in judged.figures
    replay = Replay(0.01, 1)
    verdicts = {v.metric: v for v in replay.replay_case(judged, random.Random(0))}
    assert verdicts["cpu_time_s"].threshold_pct == 2.5 and verdicts["step_time_s"].threshold_pct == 10.0
    # a run that did not judge CPU time is replayed without it, as the live gate would judge it
    unjudged = load_recorded([_recording(tmp_path / "unjudged.json", None)])["t.py::test_step"]
    assert unjudged.cpu_threshold_pct is None and "cpu_time_s" not in unjudged.figures
    turned_off = load_recorded([_recording(tmp_path / "off.json", "off")])["t.py::test_step"]
    assert turned_off.cpu_threshold_pct is None and "cpu_time_s" not in turned_off.figures


def test_a_replay_can_judge_recorded_cpu_pairs_at_another_run_cpu_threshold(tmp_path: Path) -> None:
    import json

    from pytest_dmlbench.gates.paired.recorded import load_recorded

    recorded = _recording(tmp_path / "judged.json", 2.5)
    assert load_recorded([recorded], run_cpu_threshold=10.0)["t.py::test_step"].cpu_threshold_pct == 10.0
    turned_off = load_recorded([recorded], run_cpu_threshold="off")["t.py::test_step"]
    assert turned_off.cpu_threshold_pct is None and "cpu_time_s" not in turned_off.figures
    # without one, the recorded run's threshold (the negative control of the two above) ...
    assert load_recorded([recorded])["t.py::test_step"].cpu_threshold_pct == 2.5
    # ... and a case's own CPU threshold stays, as a case's marker threshold does under --threshold
    document = json.loads(recorded.read_text())
    document["cases"][0]["cpu_threshold_pct"] = 5.0
    recorded.write_text(json.dumps(document))
    for run_cpu in (10.0, "off"):
        assert load_recorded([recorded], run_cpu_threshold=run_cpu)["t.py::test_step"].cpu_threshold_pct == 5.0
