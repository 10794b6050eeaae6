"""``--dmlbench-smoke`` runs every case once, each measurement for one round, and judges and saves nothing;
with ``--dmlbench-save`` or ``--dmlbench-against`` it is a usage error."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import run_pytest, write_files

CASES = """
    import pytest

    @pytest.mark.dmlbench(world_size=2)
    def test_timed(dist, dmlbench):
        dmlbench.pedantic(lambda: None, rounds=50, warmup=3)

    @pytest.mark.dmlbench(world_size=2)
    def test_broken(dist, dmlbench):
        dmlbench.pedantic(lambda: None, rounds=50)
        assert dist.rank == 0, "a wrong body still fails in a smoke run"

    def test_in_process(dmlbench_metrics):
        dmlbench_metrics.record("dispatch_overhead_s", [1.0 if dmlbench_metrics.block is None else 2.0])
"""


def test_a_smoke_run_runs_every_case_for_one_round_and_judges_nothing(tmp_path: Path) -> None:
    write_files(tmp_path, **{"test_cases.py": CASES, "pytest.ini": "[pytest]\n"})
    saved = run_pytest(tmp_path, "--dmlbench", "--dmlbench-save", "-k", "timed")  # a baseline to not compare with
    assert saved.returncode == 0, saved.output
    run = run_pytest(tmp_path, "--dmlbench", "--dmlbench-smoke", "--dmlbench-json", "smoke.json")
    assert run.returncode == 1, run.output
    run.lines.fnmatch_lines(["*a wrong body still fails in a smoke run*", "dmlbench: smoke run (--dmlbench-smoke)*",
                             "*1 failed, 2 passed*"])
    cases = {c["nodeid"].split("::")[-1]: c for c in json.loads((tmp_path / "smoke.json").read_text())["cases"]}
    assert len(cases["test_timed"]["metrics"]["step_time_s"]["samples"]) == 1  # one round, not 50
    assert cases["test_in_process"]["metrics"]["dispatch_overhead_s"]["samples"] == [2.0]  # the body saw the block
    assert all(not c["verdicts"] for c in cases.values())  # nothing judged, though a baseline exists
    # negative control: the same run without the flag measures the 50 rounds and compares with the baseline
    plain = run_pytest(tmp_path, "--dmlbench", "--dmlbench-json", "plain.json", "-k", "timed")
    (case,) = json.loads((tmp_path / "plain.json").read_text())["cases"]
    assert len(case["metrics"]["step_time_s"]["samples"]) == 50 and case["verdicts"], plain.output


@pytest.mark.parametrize("other", ["--dmlbench-save", "--dmlbench-against=HEAD"])
def test_smoke_with_save_or_against_is_a_usage_error(tmp_path: Path, other: str) -> None:
    write_files(tmp_path, **{"test_cases.py": CASES, "pytest.ini": "[pytest]\n"})
    run = run_pytest(tmp_path, "--dmlbench", "--dmlbench-smoke", other)
    assert run.returncode == 4, run.output
    run.lines.fnmatch_lines(["*--dmlbench-smoke runs every measurement once, so there is nothing to *"])
