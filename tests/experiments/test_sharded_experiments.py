"""``fsdp`` and ``tensor_parallel`` run as experiments on a real 2-rank gloo world: they train, the trained
model is gathered whole and evaluated, and the accuracy check fails when the model did not learn."""

from __future__ import annotations

import json
from pathlib import Path

from tests.conftest import run_pytest, write_files

EXPERIMENTS = """
    defaults:
      model: mlp
      world_size: 2
      batch_size: 64
      epochs: 3
      max_batches_per_epoch: 8
      eval_batches: 4
      lr: 0.1
      momentum: 0.9
      threshold: 1000   # this test checks the plumbing, not this machine's noise
    experiments:
      - name: learns
        min_accuracy: 0.4
        matrix:
          strategy: [fsdp, tensor_parallel]
      - name: frozen
        strategy: tensor_parallel
        lr: 1.0e-9
        min_accuracy: 0.4
"""


def test_sharded_strategies_learn_in_an_experiment_and_a_frozen_one_fails(tmp_path: Path) -> None:
    write_files(tmp_path, **{"dmlbench_sharded.yaml": EXPERIMENTS})
    out = tmp_path / "results.json"
    run = run_pytest(tmp_path, "--dmlbench", "--dmlbench-json", str(out), timeout=600)
    assert run.returncode == 1, run.output
    cases = {c["nodeid"].split("::")[-1]: c for c in json.loads(out.read_text())["cases"]}
    learned = {name: case["metrics"]["accuracy"]["samples"][0] for name, case in cases.items()
               if name.startswith("learns")}
    assert len(learned) == 2 and all(a >= 0.4 for a in learned.values()), learned
    # negative control: the evaluation reads the trained parameters, so an untrained model fails its check
    run.lines.fnmatch_lines(["AssertionError: experiment frozen: held-out accuracy * < min_accuracy 0.4 *",
                             "FAILED dmlbench_sharded.yaml::frozen - *"])
    assert "FAILED dmlbench_sharded.yaml::learns" not in run.output, run.output
