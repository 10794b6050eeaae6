"""``studies/session_detection_quality.py``: the baseline it saves session by session and the median rule it sets
beside the stored rule; whole sessions (two calibrations, then pairs of sessions) daily."""

from __future__ import annotations

import random

import pytest

from pytest_dmlbench.results import CaseResult, MetricResult, RunResults
from studies import session_detection_quality
from studies.session_detection_quality import _median_rule, saved_baseline, step_median
from tests.studies.running import run_study


def session(step_s: float, rng: random.Random) -> RunResults:
    case = CaseResult("t.py::test_step", {}, 2, "gloo",
                      metrics={"step_time_s": MetricResult.of("step_time_s", [step_s * rng.gauss(1, 0.01)
                                                                              for _ in range(30)])})
    return RunResults(machine={}, created="2026-11-29T00:00:00+00:00", cases=[case])


def test_each_save_carries_the_earlier_medians_into_the_baseline() -> None:
    rng = random.Random(0)
    saves = [session(0.010, rng), session(0.011, rng), session(0.012, rng)]
    stored = saved_baseline(saves, threshold=10.0, alpha=0.01)
    history = stored["t.py::test_step"].metrics["step_time_s"].history
    assert [round(m, 3) for m in history] == [0.010, 0.011]  # the earlier saves' medians, oldest first
    assert saves[0].cases[0].metrics["step_time_s"].history == []  # the sessions themselves are left as they were
    assert step_median(saves[2]) == pytest.approx(0.012, rel=0.02)


def test_the_median_rule_reads_throughput_the_other_way() -> None:
    assert _median_rule([1.0, 1.0], [1.2, 1.2], "lower", 10.0)
    assert not _median_rule([1.0, 1.0], [1.05, 1.05], "lower", 10.0)
    assert _median_rule([1.2, 1.2], [1.0, 1.0], "higher", 10.0)  # throughput fell by a sixth
    assert not _median_rule([1.0, 1.0], [1.2, 1.2], "higher", 10.0)  # throughput rose


def test_pairs_must_exceed_saves(capsys: pytest.CaptureFixture[str]) -> None:
    done = run_study(session_detection_quality.main, capsys, "--pairs", "2", "--saves", "2")
    assert done.returncode == 2 and "--pairs must exceed --saves" in done.stderr


@pytest.mark.slow
def test_two_pairs_of_sessions(capsys: pytest.CaptureFixture[str]) -> None:
    done = run_study(session_detection_quality.main, capsys, "--pairs", "2", "--saves", "1", "--rounds", "10",
                     "--world-size", "2")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "6 sessions of `pytest --dmlbench --world-size 2`" in done.stdout
    assert "median:10%: false regressions" in done.stdout
