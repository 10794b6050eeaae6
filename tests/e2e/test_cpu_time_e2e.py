"""CPU time per step on a real gloo world: recorded beside wall time, summed over ranks, in the results file."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

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


SPIN_AND_NAP = """
    import time
    import pytest

    def work():
        total = 0.0
        for i in range(200000):
            total += i * 0.5
        return total

    @pytest.mark.dmlbench(world_size=2)
    def test_spin(dist, dmlbench):  # computes the whole step
        dmlbench.pedantic(work, rounds=5, warmup=1)

    @pytest.mark.dmlbench(world_size=2)
    def test_nap(dist, dmlbench):  # mostly waits
        dmlbench.pedantic(lambda: time.sleep(0.03), rounds=5, warmup=1)
"""


def test_by_default_cpu_time_is_judged_on_a_step_that_computes_and_not_on_one_that_waits(tmp_path: Path) -> None:
    write_files(tmp_path, **{"test_x.py": SPIN_AND_NAP})
    common = ("--dmlbench", "--world-size", "2", "-p", "no:randomly")
    saved = run_pytest(tmp_path, *common, "--dmlbench-save")
    assert saved.returncode == 0, saved.output

    outputs: list[str] = []

    def compared(*options: str) -> dict[str, Any]:
        run = run_pytest(tmp_path, *common, "--dmlbench-json", "r.json", *options)
        assert run.returncode == 0, run.output
        outputs.append(run.output)
        document = json.loads((tmp_path / "r.json").read_text())
        return {case["nodeid"].split("::")[-1]: case for case in document["cases"]} | {"run": document["run"]}

    cases = compared()
    # the table under the run says so too, not only the results file
    assert "notes on 1 case(s): CPU time not judged (1); -v prints each under its case" in outputs[-1], outputs[-1]
    assert cases["run"]["cpu_threshold_pct"] == 10.0 and cases["run"]["cpu_threshold_judges"] == "steps that compute"
    spin = {v["metric"]: v for v in cases["test_spin"]["verdicts"]}
    assert spin["cpu_time_s"]["threshold_pct"] == 10.0, spin  # judged at the default
    nap = cases["test_nap"]
    assert "cpu_time_s" in nap["metrics"] and "cpu_time_s" not in {v["metric"] for v in nap["verdicts"]}, nap
    assert any("CPU time not judged: the step mostly waits" in note for note in nap["extra"]["notes"]), nap["extra"]
    assert "step_time_s" in {v["metric"] for v in nap["verdicts"]}  # wall time judges it
    # negative control: a CPU threshold given judges the waiting step's CPU time too
    given = compared("--dmlbench-cpu-threshold", "10")
    assert given["run"]["cpu_threshold_judges"] == "every step"
    assert "cpu_time_s" in {v["metric"] for v in given["test_nap"]["verdicts"]}, given["test_nap"]
    assert "CPU time not judged" not in outputs[-1], outputs[-1]
