"""The rank-side runner on a real one-rank gloo group in this process: what it records, and a training
set too small for one batch as a clear error."""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_dmlbench.experiments import Experiment, load_file
from pytest_dmlbench.experiments.runner import run_experiment
from pytest_dmlbench.measure.bench import RankBench
from pytest_dmlbench.measure.dist_info import DistInfo
from pytest_dmlbench.measure.rounds import CALIBRATION_BUDGET, BlockBudget
from tests.experiments.test_run import write_fake_cifar


def _experiment(tmp_path: Path, fields: str) -> Experiment:
    path = tmp_path / "dmlbench_r.yaml"
    path.write_text(f"experiments:\n  - {{name: r, {fields}}}\n")
    return load_file(path, default_world_size=1)[0]


def test_records_every_figure_per_epoch(world1: None, tmp_path: Path) -> None:
    experiment = _experiment(tmp_path, "model: transformer, dataset: tokens, batch_size: 8, epochs: 2, "
                                       "max_batches_per_epoch: 3, comm_rounds: 1")
    bench = RankBench(DistInfo(0, 1, "gloo", "cpu"))
    run_experiment(DistInfo(0, 1, "gloo", "cpu"), bench, experiment=experiment)
    counts = {name: len(metric.samples) for name, metric in bench.metrics.items()}
    assert counts == {"total_time_s": 1, "epoch_time_s": 2, "throughput_samples_per_s": 2, "loss": 2,
                      "comm_bytes_per_step": 6, "step_time_s": 6, "accuracy": 1, "exposed_comm_fraction": 1,
                      "comm_busy_fraction": 1, "peak_rss_mb": 1}
    assert bench.metrics["comm_bytes_per_step"].samples == [0.0] * 6  # one rank: nothing is communicated
    epochs = zip(bench.metrics["throughput_samples_per_s"].samples, bench.metrics["epoch_time_s"].samples,
                 strict=True)
    assert [round(rate * seconds) for rate, seconds in epochs] == [24, 24]


def test_training_set_smaller_than_one_batch_is_a_clear_error(world1: None, tmp_path: Path) -> None:
    write_fake_cifar(tmp_path / "cifar", train_images=5)
    experiment = _experiment(tmp_path, "model: cnn, dataset: cifar10, data_dir: cifar, batch_size: 8")
    with pytest.raises(ValueError, match=r"^experiment r: the training set holds 5 samples, fewer than one global "
                                         r"batch of 8; lower batch_size$"):
        run_experiment(DistInfo(0, 1, "gloo", "cpu"), RankBench(DistInfo(0, 1, "gloo", "cpu")),
                       experiment=experiment)


def _counts_in(block: BlockBudget | None, tmp_path: Path, fields: str = "") -> dict[str, int]:
    experiment = _experiment(tmp_path, "model: transformer, dataset: tokens, batch_size: 8, epochs: 3, "
                                       f"max_batches_per_epoch: 2, comm_rounds: 2{fields}")
    bench = RankBench(DistInfo(0, 1, "gloo", "cpu"), block)
    run_experiment(DistInfo(0, 1, "gloo", "cpu"), bench, experiment=experiment)
    return {name: len(metric.samples) for name, metric in bench.metrics.items()}


def test_a_block_of_the_paired_gate_sets_the_experiment_s_steps_and_communication_rounds(
        world1: None, tmp_path: Path) -> None:
    # one epoch of the block's 7 rounds (the 2-batch epoch cycles), 7 rounds against the twin
    budgeted = _counts_in(BlockBudget(rounds=7, warmup=1), tmp_path)
    assert (budgeted["epoch_time_s"], budgeted["step_time_s"], budgeted["comm_bytes_per_step"]) == (1, 7, 7)
    # negative control: the ordinary (calibration) run and a block beside an older REF train in full
    for whole in (CALIBRATION_BUDGET, BlockBudget(rounds=7, warmup=1, whole_experiment=True), None):
        counts = _counts_in(whole, tmp_path)
        assert (counts["epoch_time_s"], counts["step_time_s"]) == (3, 6), whole


def test_a_budgeted_block_skips_the_accuracy_check_the_full_run_makes(world1: None, tmp_path: Path) -> None:
    impossible = ", min_accuracy: 1.0"  # 6 steps of a transformer on random tokens reach nowhere near it
    _counts_in(BlockBudget(rounds=3, warmup=1), tmp_path, impossible)  # cut short: accuracy not judged
    with pytest.raises(AssertionError, match=r"held-out accuracy .* < min_accuracy 1\.0 "):
        _counts_in(None, tmp_path, impossible)
