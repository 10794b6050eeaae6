"""The stored gate end to end: a figure no test can judge is inconclusive, never unchanged, and fails only
when asked; the same change measured long enough is a regression (the negative control)."""

from __future__ import annotations

import json
from pathlib import Path

from tests.conftest import run_pytest, write_files

CASES = """
    import os
    import time

    import pytest

    SLOW = float(os.environ.get("CASE_SLOW", "1"))

    @pytest.mark.dmlbench(world_size=1)
    @pytest.mark.parametrize("rounds", [7, 10])
    def test_step(dist, dmlbench, rounds):
        # 20 ms, not less: a sleep's overshoot on a loaded machine (5 ms seen) adds to both sides and shrinks
        # the x5 change; 4 ms steps read it as x2.75
        dmlbench.pedantic(time.sleep, args=(0.02 * SLOW,), rounds=rounds, warmup=1)
"""


def step_verdicts(results: Path) -> dict[str, dict[str, str]]:
    cases = json.loads(results.read_text())["cases"]
    return {c["nodeid"].split("::")[-1]: {v["metric"]: v for v in c["verdicts"]}["step_time_s"] for c in cases}


def test_too_few_rounds_is_inconclusive_and_fails_only_with_the_option(tmp_path: Path) -> None:
    write_files(tmp_path, **{"test_cases.py": CASES, "pytest.ini": "[pytest]\n"})
    for _ in range(3):  # the recipe: three saves measure the run-to-run noise
        saved = run_pytest(tmp_path, "--dmlbench", "--dmlbench-save")
        assert saved.returncode == 0, saved.output
    results = tmp_path / "results.json"
    run = run_pytest(tmp_path, "--dmlbench", "--dmlbench-json", str(results), CASE_SLOW="5")
    found = step_verdicts(results)
    assert found["test_step[7]"]["kind"] == "inconclusive", run.output  # 7 rounds: one block, no test
    assert found["test_step[10]"]["kind"] == "regression", run.output  # negative control: two blocks, judged
    assert run.returncode == 1
    assert found["test_step[7]"]["message"].startswith("step_time_s inconclusive (not tested) against the baseline: ")
    assert "x4" in found["test_step[7]"]["change"] or "x5" in found["test_step[7]"]["change"]
    assert "no test: 1 baseline vs 1 current blocks" in found["test_step[7]"]["message"]
    run.lines.fnmatch_lines(["inconclusive  test_cases.py::test_step[[]7[]]",
                             "*inconclusive step_time_s (wall time): x* slower"])
    run.lines.fnmatch_lines(["FAILED test_cases.py::test_step[[]10[]]*"])
    assert "FAILED test_cases.py::test_step[7]" not in run.output
    assert found["test_step[7]"]["inconclusive_cause"] == "untestable"
    strict = run_pytest(tmp_path, "--dmlbench", "--dmlbench-fail-on-inconclusive", "-k", "7", CASE_SLOW="5")
    assert strict.returncode == 1, strict.output
    strict.lines.fnmatch_lines(["FAILED test_cases.py::test_step[[]7[]]*"])
    # no test could run on it, so the nightly's scope (untestable figures only) fails it too
    untestable = run_pytest(tmp_path, "--dmlbench", "--dmlbench-fail-on-untestable", "-k", "7",
                            CASE_SLOW="5")
    assert untestable.returncode == 1, untestable.output
    untestable.lines.fnmatch_lines(["FAILED test_cases.py::test_step[[]7[]]*"])
