"""``dmlbench.training_steps()``: each training iteration of unchanged code timed through torch's hooks, start-up
and evaluation left out, on a flat script and a Trainer-style one, against the same iterations timed by hand."""

from __future__ import annotations

import json
from pathlib import Path

from tests.conftest import run_pytest, write_files

FLAT = """
    import json, os, sys, time
    import torch

    time.sleep(0.05)  # start-up: not a training step
    model = torch.nn.Linear(16, 2)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    by_hand = []
    for step in range(8):
        x = torch.randn(4, 16)  # data loading: before the first forward, not timed
        begin = time.perf_counter()
        loss = model(x).square().mean()
        loss.backward()
        time.sleep(0.01)
        opt.step()
        opt.zero_grad()
        by_hand.append(time.perf_counter() - begin)
        if step % 3 == 2:
            with torch.no_grad():  # evaluation: forwards without gradients and no optimizer step, not timed
                time.sleep(0.03)
                model(torch.randn(4, 16))
    with open(os.path.join(sys.argv[1], f"by_hand_{os.environ['RANK']}.json"), "w") as out:
        json.dump(by_hand, out)
"""
TRAINER = """
    import time
    import torch

    class Trainer:
        def __init__(self, steps):
            time.sleep(0.05)
            self.model = torch.nn.Linear(16, 2)
            self.opt = torch.optim.SGD(self.model.parameters(), lr=0.1)
            self.steps = steps

        def _run_batch(self, x):
            self.opt.zero_grad()
            self.model(x).square().mean().backward()
            self.opt.step()

        def train(self):
            for _ in range(self.steps):
                self._run_batch(torch.randn(4, 16))
"""
CASES = """
    import pytest
    from pytest_dmlbench.world.scripts import run_script
    import trainer

    @pytest.mark.dmlbench(world_size=2)
    def test_flat_script(dist, dmlbench, tmp_path_factory):
        import os
        out = os.environ["BY_HAND_DIR"]
        with dmlbench.training_steps(samples_per_step=8, warmup=2):
            run_script("flat.py", out)

    @pytest.mark.dmlbench(world_size=2)
    def test_trainer(dist, dmlbench):
        with dmlbench.training_steps(warmup=1):
            trainer.Trainer(steps=5).train()

    @pytest.mark.dmlbench(world_size=2)
    def test_too_few_steps(dist, dmlbench):
        with dmlbench.training_steps(warmup=5):
            trainer.Trainer(steps=3).train()
        dmlbench.record("marker", 1.0, unit="x")
"""


def test_unchanged_code_has_each_training_step_timed_and_nothing_else(tmp_path: Path) -> None:
    write_files(tmp_path, **{"flat.py": FLAT, "trainer.py": TRAINER, "test_steps.py": CASES})
    by_hand_dir = tmp_path / "by_hand"
    by_hand_dir.mkdir()
    run = run_pytest(tmp_path, "--dmlbench", "--dmlbench-json", "r.json", "--dmlbench-no-compare",
                     BY_HAND_DIR=str(by_hand_dir))
    assert run.returncode == 0, run.output
    cases = {c["nodeid"].split("::")[-1]: c for c in json.loads((tmp_path / "r.json").read_text())["cases"]}
    flat = cases["test_flat_script"]["metrics"]
    hooked = flat["step_time_s"]["samples"]
    assert len(hooked) == 8 - 2  # every training step after the warm-up; the evaluations start none
    ranks = [json.loads((by_hand_dir / f"by_hand_{r}.json").read_text()) for r in (0, 1)]
    by_hand = [max(a, b) for a, b in zip(*ranks, strict=True)][2:]  # the slowest rank's, as the figure is
    # the same intervals, summed: an evaluation (30 ms) or start-up (50 ms) counted in would double the sum
    assert 0.85 < sum(hooked) / sum(by_hand) < 1.15, (hooked, by_hand)
    assert len(flat["cpu_time_s"]["samples"]) == 6 and len(flat["throughput_samples_per_s"]["samples"]) == 6
    assert len(cases["test_trainer"]["metrics"]["step_time_s"]["samples"]) == 5 - 1
    few = cases["test_too_few_steps"]
    assert "step_time_s" not in few["metrics"]
    assert any("no more than its 5 warm-up step(s)" in note for note in few["extra"]["notes"]), few["extra"]
