"""``fsdp`` and ``tensor_parallel`` run as experiments on a real 2-rank gloo world: they train, the trained
model is gathered whole and evaluated, and the accuracy check fails when the model did not learn."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pytest_dmlbench.strategies.sharded import sharding_support
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


@pytest.mark.skipif(sharding_support() is not None, reason=f"FSDP2 and tensor parallel: {sharding_support()}")
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


def test_a_strategy_this_torch_cannot_run_is_a_field_problem(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """On a torch without FSDP2 (the floor job's) the strategy's ConfigError is reported with the file's other
    problems, not as a traceback; an older torch cannot be installed beside this one, so its answer is
    stood in for."""
    from pytest_dmlbench.errors import ConfigError
    from pytest_dmlbench.experiments import schema

    def too_old(name: str) -> None:
        raise ConfigError(f"strategy {name!r} needs a newer torch (tested with 2.14.1): torch 2.3.1 has no "
                          "torch.distributed.fsdp.fully_shard")

    monkeypatch.setattr(schema, "strategy_option_names", too_old)
    with pytest.raises(schema.FieldProblem, match="strategy: strategy 'fsdp' needs a newer torch") as problem:
        schema.validate({"name": "x", "model": "mlp", "strategy": "fsdp"}, name="x", source="f",
                        default_world_size=2, base_dir=tmp_path)
    assert problem.value.accepted == "a strategy this torch can run"
