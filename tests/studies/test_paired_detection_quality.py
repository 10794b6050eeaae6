"""``studies/paired_detection_quality.py``: its three-commit repository, what it reads from verdicts and runs, and
its summary of a saved run; real sessions (a save, then paired and plain sessions) daily."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from pytest_dmlbench.results import CaseResult, MetricResult, RunResults
from studies import paired_detection_quality as study
from studies.scratch_repo import git
from tests.studies.running import run_study


def test_the_three_commits(tmp_path: Path) -> None:
    commits = study.build_repo(tmp_path, cases=3, slowdown=0.15)
    assert list(commits) == ["base", "aa", "slow"]
    libs = {name: git(tmp_path, "show", f"{commit}:lib.py") for name, commit in commits.items()}
    assert "ITERATIONS = 40  # products per step\n" in libs["base"]
    assert "ITERATIONS = 40  # products per step (comment changed only)" in libs["aa"]
    assert "ITERATIONS = 46  # products per step\n" in libs["slow"]  # 15 % more work
    assert "range(3)" in git(tmp_path, "show", f"{commits['slow']}:test_cases.py")


def test_a_verdict_s_noise_is_read_from_its_message() -> None:
    assert study.per_pair_noise("x1.15 slower, per-pair noise 4.2% over 12 pairs") == 4.2
    assert study.per_pair_noise("no test ran") is None


def run(*step_s: float) -> RunResults:
    rng = random.Random(0)
    cases = [CaseResult(f"t.py::test_step[{k}]", {}, 2, "gloo", metrics={"step_time_s": MetricResult.of(
        "step_time_s", [s * rng.gauss(1, 0.005) for _ in range(40)], better="lower")}) for k, s in enumerate(step_s)]
    return RunResults(machine={}, created="2026-11-29T00:00:00+00:00", cases=cases)


def test_the_median_rule_flags_what_is_slower_than_the_threshold() -> None:
    found = study.stored_verdicts(run(0.01, 0.01), run(0.0105, 0.013), threshold=10.0)
    assert {k: v["median10"] for k, v in found.items()} == {"t.py::test_step[0]": False, "t.py::test_step[1]": True}


def test_a_saved_run_is_summarized(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    items = [{"way": way, "nodeid": "t", "failed": way == "slow", "paired_step": None, "pairs": 4, "stages": 1,
              "ratio": 1.0 + 0.15 * (way == "slow"), "seconds": 1.0, "noise_pct": 3.0} for way in ("aa", "slow")]
    stored = [{"way": way, "nodeid": "t", "stored_rule": False, "median10": way == "slow"} for way in ("aa", "slow")]
    sessions = [{"way": way, "wall_s": wall, "exit": 0, "paired": paired}
                for way in ("aa", "slow") for wall, paired in ((12.0, True), (8.0, False))]
    saved = tmp_path / "saved.json"
    saved.write_text(json.dumps({"world_sizes": {"2": {"sessions": sessions, "items": items, "stored_items": stored}}}))
    done = run_study(study.main, capsys, "--summarize", str(saved))
    assert done.returncode == 0, done.stderr
    assert "== world size 2: 1 unchanged items, 1 items 15 % slower ==" in done.stdout
    rows = {line[:36].strip(): line[36:].split() for line in done.stdout.splitlines()}
    assert rows["paired gate (item fails)"] == ["0/1", "=", "0.0", "%", "1/1", "=", "100.0", "%"]
    assert rows["pytest-benchmark median:10%"] == ["0/1", "=", "0.0", "%", "1/1", "=", "100.0", "%"]
    assert rows["stored-baseline rule (saved 1x)"] == ["0/1", "=", "0.0", "%", "0/1", "=", "0.0", "%"]
    assert "cost (paired / plain session beside it) median 1.50x" in done.stdout


@pytest.mark.slow
def test_one_session_each_way(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "pdq.json"
    done = run_study(study.main, capsys, "--world-sizes", "2", "--sessions", "1", "--cases", "1",
                     "--out", str(out))
    assert done.returncode == 0, done.stderr
    saved = json.loads(out.read_text())["world_sizes"]["2"]
    assert sorted(i["way"] for i in saved["items"]) == ["aa", "slow"]
    assert len(saved["sessions"]) == 4  # paired and plain, each way
