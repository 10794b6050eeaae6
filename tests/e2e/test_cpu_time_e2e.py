"""CPU time per step on a real gloo world: recorded beside wall time, summed over ranks, in the results file."""

from __future__ import annotations

import json
from pathlib import Path

from tests.conftest import run_pytest, write_files

CASES = """
    import pytest
    from pytest_dmlbench.measure.clock import ManualClock, use_cpu_clock

    @pytest.mark.dmlbench(world_size=2)
    def test_rank_cpu(dist, dmlbench):
        cpu = ManualClock()  # this rank's CPU clock: rank r spends (r + 1) ms of CPU a step
        with use_cpu_clock(cpu):
            dmlbench.pedantic(cpu.advance, args=(0.001 * (dist.rank + 1),), rounds=3, warmup=1)
"""


def test_cpu_time_is_recorded_summed_over_the_ranks_of_a_real_world(tmp_path: Path) -> None:
    write_files(tmp_path, **{"test_x.py": CASES})
    result = run_pytest(tmp_path, "--dmlbench", "--world-size", "2", "--dmlbench-json", "r.json",
                        "--dmlbench-no-compare")
    assert result.returncode == 0, result.output
    case = json.loads((tmp_path / "r.json").read_text())["cases"][0]
    samples = case["metrics"]["cpu_time_s"]["samples"]
    assert all(abs(s - 0.003) < 1e-12 for s in samples), samples  # rank 0 spent 1 ms and rank 1 2 ms a step
    assert "step_time_s" in case["metrics"]


def test_a_bad_cpu_threshold_is_refused_before_the_run(tmp_path: Path) -> None:
    write_files(tmp_path, **{"test_x.py": CASES})
    result = run_pytest(tmp_path, "--dmlbench", "--world-size", "2", "--dmlbench-cpu-threshold", "fast")
    assert result.returncode != 0
    assert "--dmlbench-cpu-threshold: 'fast' is not a percentage" in result.output


def test_off_leaves_cpu_time_recorded_and_unjudged_for_the_run(tmp_path: Path) -> None:
    write_files(tmp_path, **{"test_x.py": CASES})
    for given, recorded in (("off", None), ("3%", 3.0)):  # the number is the negative control
        result = run_pytest(tmp_path, "--dmlbench", "--world-size", "2", "--dmlbench-json", "r.json",
                            "--dmlbench-no-compare", "--dmlbench-cpu-threshold", given)
        assert result.returncode == 0, result.output
        document = json.loads((tmp_path / "r.json").read_text())
        assert document["run"]["cpu_threshold_pct"] == recorded
        assert "cpu_time_s" in document["cases"][0]["metrics"]  # recorded either way
