"""The paired decision procedure on its own: a trial fed block pairs from a list, no block server."""

from __future__ import annotations

import random
import subprocess
import sys
from pathlib import Path

import pytest

from pytest_dmlbench.gates.gate import JudgedItem
from pytest_dmlbench.gates.paired.pairs import BlockPair, ListSource
from pytest_dmlbench.gates.paired.stage import CaseJudgement
from pytest_dmlbench.gates.paired.statistics import SequentialRule
from pytest_dmlbench.gates.paired.trial import Trial
from pytest_dmlbench.gates.paired.verdict_writer import VerdictWriter
from pytest_dmlbench.gates.run_level import RunLevelRule
from pytest_dmlbench.results import MetricResult, Verdict

ITEM = JudgedItem("t.py::test_step", Path("t.py"), 60.0, run_options=("--world-size", "2"))


def _pairs(slowdown: float, more_bytes: int = 0, n: int = 120, seed: int = 0) -> list[BlockPair]:
    """Pairs of a 10 ms step: both blocks of a pair share its machine phase (up to 25 % apart between pairs),
    each has 3 % noise of its own; A's steps take ``1 + slowdown`` times as long and send ``more_bytes`` more."""
    rng = random.Random(seed)
    pairs = []
    for i in range(n):
        phase = rng.uniform(0.8, 1.25)
        a = [0.01 * phase * (1 + slowdown) * rng.gauss(1, 0.03) for _ in range(5)]
        b = [0.01 * phase * rng.gauss(1, 0.03) for _ in range(5)]
        pairs.append(BlockPair({"step_time_s": tuple(a), "throughput_samples_per_s": tuple(64 / t for t in a),
                                "comm_bytes_per_step": (4096.0 + more_bytes,)},
                               {"step_time_s": tuple(b), "throughput_samples_per_s": tuple(64 / t for t in b),
                                "comm_bytes_per_step": (4096.0,)}, a_first=i % 2 == 0))
    return pairs


def _judge(pairs: list[BlockPair]) -> tuple[dict[str, Verdict], CaseJudgement, ListSource]:
    trial = Trial(VerdictWriter("main", "c0ffee" * 7), RunLevelRule(0.01, 1), SequentialRule())
    directed = {"step_time_s": MetricResult.of("step_time_s", [0.01]),
                "throughput_samples_per_s": MetricResult.of("throughput_samples_per_s", [6400.0]),
                "comm_bytes_per_step": MetricResult.of("comm_bytes_per_step", [4096.0])}
    judgement = CaseJudgement(ITEM.nodeid)
    source = ListSource(pairs, seconds_per_pair=1.0)
    units = {name: metric.unit for name, metric in directed.items()}  # REF records them alike
    verdicts = trial.judge_case(ITEM, directed, units, 10.0, source, judgement, source.now())
    return {v.metric: v for v in verdicts}, judgement, source


def test_a_trial_on_a_list_source_flags_a_20_percent_slowdown_and_not_an_a_a_pair_set() -> None:
    same, judgement, source = _judge(_pairs(0.0))
    assert {v.kind for v in same.values()} == {"unchanged"}, [v.message for v in same.values()]
    assert len(judgement.stages) == 1 and source.served == judgement.stages[0] >= 4  # nothing to confirm
    slow, judgement, source = _judge(_pairs(0.2))
    for name in ("step_time_s", "throughput_samples_per_s"):
        assert slow[name].kind == "regression", slow[name].message
        assert "confirmed yes by the second stage" in slow[name].message
        assert "Reproduce: pytest --dmlbench --world-size 2 --dmlbench-against c0ffeec0ffee t.py::test_step" in (
            slow[name].message)
    assert slow["comm_bytes_per_step"].kind == "unchanged"  # the bytes did not change
    assert len(judgement.stages) == 2 and source.served == sum(judgement.stages)
    # the record a results file keeps: per stage, who ran first and both sides' block medians
    first = judgement.block_medians[0]
    assert first["a_first"] == [i % 2 == 0 for i in range(judgement.stages[0])]
    assert len(first["a"]["step_time_s"]) == len(first["b"]["step_time_s"]) == judgement.stages[0]
    assert first["a"]["comm_bytes_per_step"] == [4096.0] * judgement.stages[0]  # single readings kept for replay


def test_a_single_reading_is_compared_directly_on_the_trials_pairs() -> None:
    verdicts, _, _ = _judge(_pairs(0.0, more_bytes=1024))
    assert verdicts["comm_bytes_per_step"].kind == "regression", verdicts["comm_bytes_per_step"].message
    assert "compared exactly" in verdicts["comm_bytes_per_step"].message
    assert verdicts["step_time_s"].kind == "unchanged"


def test_a_list_source_that_runs_out_says_so() -> None:
    with pytest.raises(ValueError, match="ran out after 3 pair"):
        _judge(_pairs(0.0, n=3))


FACE = ("pytest", "pytest_dmlbench.gates.paired.client", "pytest_dmlbench.gates.paired.launch",
        "pytest_dmlbench.gates.paired.worktree", "pytest_dmlbench.gates.paired.gate")


def _imported_face(module: str) -> list[str]:
    """Which of :data:`FACE` a fresh interpreter holds after importing ``module``."""
    code = f"import sys, {module}; print(' '.join(m for m in {FACE!r} if m in sys.modules))"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    return done.stdout.split()


def test_the_trial_and_the_replay_stand_without_pytest_and_refs_lifecycle() -> None:
    """The trial and the replay of recorded nights import neither pytest nor the code that starts, reaches or
    checks out REF (negative control: the live gate imports pytest, the client and the worktree)."""
    assert _imported_face("pytest_dmlbench.gates.paired.trial") == []
    assert _imported_face("pytest_dmlbench.gates.replay") == []
    assert {"pytest", "pytest_dmlbench.gates.paired.client", "pytest_dmlbench.gates.paired.worktree"} <= set(
        _imported_face("pytest_dmlbench.gates.paired.gate"))
