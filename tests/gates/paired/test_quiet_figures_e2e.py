"""The quiet figures end to end in the paired gate, in a real git repository on a real gloo world: collective
calls (in total and by kind) and FLOPs counted exactly, by dmlbench.train and by dmlbench(fn), CPU time judged at
its own threshold and blind to a sleep, and the table naming the kind of figure that saw each change."""

from __future__ import annotations

import json
from typing import NamedTuple

import pytest

from tests.conftest import run_pytest, write_files
from tests.gates.paired.gitrepo import make_repo

LIB_REF = """
    import time
    import torch
    import torch.distributed as dist

    CALLS = 1
    WIDTH = 32
    SPIN = 1.0
    NAP = 0.004

    def synced_step(inputs, targets, loss_fn):  # the same 64 floats, in CALLS all_reduces
        for part in torch.ones(64).chunk(CALLS):
            dist.all_reduce(part.clone())
        time.sleep(0.005)
        return 0.0

    def work(n):
        total = 0.0
        for i in range(n):
            total += i * 0.5
        return total

    def spin():  # SPIN times the work
        return work(int(20000 * SPIN))

    def nap():  # the same work, after a longer sleep
        time.sleep(NAP)
        return work(20000)

    def synced_call():  # dmlbench(fn)'s counters: the same 64 floats in CALLS all_reduces, one broadcast, a product
        for part in torch.ones(64).chunk(CALLS):
            dist.all_reduce(part.clone())
        dist.broadcast(torch.ones(4), src=0)
        a = torch.ones(WIDTH, WIDTH)
        return float((a @ a).sum())
"""
CASES = """
    import pytest
    import torch
    import lib

    BATCH = [(torch.zeros(1), torch.zeros(1))]

    @pytest.mark.dmlbench(world_size=2, threshold=50)
    def test_calls(dist, dmlbench):
        dmlbench.train(lib.synced_step, BATCH, global_batch_size=2, loss_fn=None)

    @pytest.mark.dmlbench(world_size=2, threshold=50, cpu_threshold=50)
    def test_spin(dist, dmlbench):
        dmlbench(lib.spin)

    @pytest.mark.dmlbench(world_size=2, threshold=50, cpu_threshold=50)
    def test_nap(dist, dmlbench):
        dmlbench(lib.nap)

    @pytest.mark.dmlbench(world_size=2, threshold=300)  # its wall time (+50 % or so) clear of it: few pairs
    def test_fn_counters(dist, dmlbench):
        dmlbench(lib.synced_call)
"""
CHANGE = {"CALLS = 1": "CALLS = 2", "WIDTH = 32": "WIDTH = 64", "SPIN = 1.0": "SPIN = 2.5", "NAP = 0.004": "NAP = 0.02"}


def _changed(lib: str) -> str:
    for old, new in CHANGE.items():
        lib = lib.replace(old, new)
    return lib


Verdicts = dict[str, dict[str, dict[str, object]]]


class QuietRun(NamedTuple):
    verdicts: Verdicts  # per case (its test name) the verdict on each figure, as the results file holds it
    output: str  # what the run printed, at 200 columns
    notes: dict[str, list[str]]  # per case its notes (extra.notes)


@pytest.fixture(scope="module")
def quiet(tmp_path_factory: pytest.TempPathFactory) -> QuietRun:
    repo = make_repo(tmp_path_factory.mktemp("quiet") / "repo", **{
        "lib.py": LIB_REF, "test_cases.py": CASES, "pytest.ini": "[pytest]\n"})
    write_files(repo, **{"lib.py": _changed(LIB_REF)})  # the change under test, uncommitted
    results = repo.parent / "results.json"
    run = run_pytest(repo, "--dmlbench", "--dmlbench-against", "HEAD", "--dmlbench-json", str(results),
                     "--dmlbench-block-seconds", "0.05", timeout=900, COLUMNS="200")
    assert run.returncode == 1, run.output  # the added collective, the FLOPs and the spin fail their cases
    cases = json.loads(results.read_text())["cases"]
    return QuietRun({case["nodeid"].split("::")[-1]: {v["metric"]: v for v in case["verdicts"]} for case in cases},
                    run.output, {case["nodeid"].split("::")[-1]: case["extra"].get("notes", []) for case in cases})


def test_an_added_collective_is_a_regression_counted_exactly(quiet: QuietRun) -> None:
    verdicts = quiet.verdicts
    calls = verdicts["test_calls"]["collective_calls_per_step"]
    assert calls["kind"] == "regression", calls
    assert (calls["baseline_median"], calls["current_median"]) == (1.0, 2.0)
    assert "any change in the collective calls a step makes is a regression" in str(calls["message"])
    # negative control: the same 64 floats were sent, so the bytes read the same, exactly
    assert verdicts["test_calls"]["comm_bytes_per_step"]["kind"] == "unchanged"


def test_the_added_all_reduce_is_caught_by_its_kind_and_the_table_says_a_counter_saw_it(
        quiet: QuietRun) -> None:
    verdicts = quiet.verdicts
    for case in ("test_calls", "test_fn_counters"):  # dmlbench.train, and dmlbench(fn) counted in a warm-up round
        kind = verdicts[case]["collective_calls_per_step.all_reduce"]
        assert kind["kind"] == "regression" and (kind["baseline_median"], kind["current_median"]) == (1.0, 2.0), kind
        assert "any change in the all_reduce calls a step makes is a regression" in str(kind["message"])
        assert "seen by a work counter, which counts exactly and misses speed" in str(kind["message"])
    assert not any(name.startswith("collective_calls_per_step.") for name in verdicts["test_nap"])  # calls none
    output = quiet.output
    assert "REGRESSION collective_calls_per_step.all_reduce (work counter): x2 worse" in output, output
    assert "REGRESSION cpu_time_s (CPU time)" in output, output
    assert "differ between ranks" not in output  # every rank counted alike


def test_more_counted_work_is_a_regression_of_flops(quiet: QuietRun) -> None:
    fn = quiet.verdicts["test_fn_counters"]  # dmlbench(fn): its FLOPs counted in the untimed warm-up round
    flops = fn["flops_per_step"]
    assert flops["kind"] == "regression" and flops["current_median"] == 8 * flops["baseline_median"], flops  # type: ignore[operator]
    # negative controls: the unchanged kind and the same 64 floats read unchanged, exactly
    assert fn["collective_calls_per_step.broadcast"]["kind"] == fn["comm_bytes_per_step"]["kind"] == "unchanged", fn


def test_cpu_time_sees_more_work_and_not_a_sleep(quiet: QuietRun) -> None:
    verdicts = quiet.verdicts
    spin = verdicts["test_spin"]["cpu_time_s"]
    assert spin["kind"] == "regression" and spin["threshold_pct"] == 50.0, spin
    nap = verdicts["test_nap"]
    assert nap["step_time_s"]["kind"] == "regression", nap["step_time_s"]  # 4 ms -> 20 ms of sleep
    assert nap["cpu_time_s"]["kind"] != "regression", nap["cpu_time_s"]  # the same work: CPU time cannot see it


def test_the_default_cpu_threshold_leaves_a_step_that_mostly_waits_unjudged_and_says_so(quiet: QuietRun) -> None:
    # test_calls sleeps 5 ms a step and gives no CPU threshold: wall time judges it, CPU time is recorded only
    assert "cpu_time_s" not in quiet.verdicts["test_calls"] and "step_time_s" in quiet.verdicts["test_calls"]
    assert any("CPU time not judged: the step mostly waits" in note for note in quiet.notes["test_calls"]), quiet.notes
    # negative control: a case with a CPU threshold of its own is judged on CPU time, and says nothing of waiting
    assert "cpu_time_s" in quiet.verdicts["test_nap"]
    assert not any("CPU time not judged" in note for note in quiet.notes["test_nap"]), quiet.notes
