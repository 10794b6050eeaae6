"""Work counters that differ between ranks, end to end on a real 4-rank gloo world with the stored gate: a pipeline's
stages send and receive unlike counts, and one more message between two stages whose counts lie below the max is
a regression of the calls (recorded as the mean over ranks), through dmlbench.train and dmlbench(fn) alike."""

from __future__ import annotations

import json
from pathlib import Path

from tests.conftest import run_pytest, write_files

CASES = """
    import os

    import pytest
    import torch
    import torch.distributed as dist

    EXTRA = os.environ.get("EXTRA_MESSAGE") == "1"

    def pipeline_step(inputs=None, targets=None, loss_fn=None):
        # forward 0 -> 1 -> 2 -> 3 and backward 3 -> 2 -> 1 -> 0: the middle stages send and receive twice, the ends
        # once each; EXTRA: the last stage also sends to the first, which leaves every max over ranks as it was
        rank, size = dist.get_rank(), dist.get_world_size()
        ops = []
        if rank + 1 < size:
            ops += [dist.isend(torch.ones(4), rank + 1), dist.irecv(torch.empty(4), rank + 1)]
        if rank > 0:
            ops += [dist.irecv(torch.empty(4), rank - 1), dist.isend(torch.ones(4), rank - 1)]
        if EXTRA and rank == size - 1:
            ops.append(dist.isend(torch.ones(4), 0))
        if EXTRA and rank == 0:
            ops.append(dist.irecv(torch.empty(4), size - 1))
        for op in ops:
            op.wait()
        return 0.0

    @pytest.mark.dmlbench(world_size=4)
    def test_train(dist, dmlbench):
        dmlbench.train(pipeline_step, [(None, None)], global_batch_size=4, loss_fn=None, rounds=3, warmup=1)

    @pytest.mark.dmlbench(world_size=4)
    def test_fn(dist, dmlbench):
        dmlbench.pedantic(pipeline_step, rounds=3, warmup=1)
"""
CALLS = ("collective_calls_per_step", "collective_calls_per_step.send", "collective_calls_per_step.recv")


def _cases(results: Path) -> dict[str, dict[str, object]]:
    return {c["nodeid"].split("::")[-1]: c for c in json.loads(results.read_text())["cases"]}


def test_a_message_added_between_stages_below_the_max_is_a_regression_of_the_calls(tmp_path: Path) -> None:
    write_files(tmp_path, **{"test_cases.py": CASES})
    saved = run_pytest(tmp_path, "--dmlbench", "--dmlbench-save", "--dmlbench-json", "saved.json")
    assert saved.returncode == 0, saved.output
    for name, case in _cases(tmp_path / "saved.json").items():
        metrics = case["metrics"]
        assert isinstance(metrics, dict)
        # 3 sends and 3 receives over 4 ranks: the mean, 1.5 each (their max is 2)
        assert [metrics[m]["stats"]["median"] for m in CALLS] == [3.0, 1.5, 1.5], name
        assert any("collective_calls_per_step.send: 1 on ranks 0, 3, 2 on ranks 1-2" in note
                   for note in case["extra"]["notes"]), name  # type: ignore[index]
    same = run_pytest(tmp_path, "--dmlbench", "--dmlbench-json", "same.json")
    assert same.returncode == 0, same.output  # negative control: the same messages read unchanged
    for name, case in _cases(tmp_path / "same.json").items():
        kinds = {v["metric"]: v["kind"] for v in case["verdicts"]}  # type: ignore[attr-defined]
        assert [kinds[m] for m in CALLS] == ["unchanged"] * 3, name
    more = run_pytest(tmp_path, "--dmlbench", "--dmlbench-json", "more.json", EXTRA_MESSAGE="1")
    assert more.returncode == 1, more.output
    for name, case in _cases(tmp_path / "more.json").items():
        verdicts = {v["metric"]: v for v in case["verdicts"]}  # type: ignore[attr-defined]
        assert [verdicts[m]["kind"] for m in CALLS] == ["regression"] * 3, name
        assert verdicts["collective_calls_per_step.send"]["message"].startswith(
            "collective_calls_per_step.send regressed against the baseline: 1.5 calls -> 1.75 calls"), name
    more.lines.fnmatch_lines(["FAILED test_cases.py::test_train*", "FAILED test_cases.py::test_fn*"])
