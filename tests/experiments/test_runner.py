"""The rank-side runner on a real one-rank gloo group in this process: what it records, and a training
set too small for one batch as a clear error."""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_dmlbench.experiments import Experiment, load_file
from pytest_dmlbench.experiments.runner import SMOKE_SAMPLES_PER_RANK, run_experiment, smoke_form
from pytest_dmlbench.measure.bench import RankBench
from pytest_dmlbench.measure.dist_info import DistInfo
from pytest_dmlbench.measure.rounds import CALIBRATION_BUDGET, SMOKE_BUDGET, BlockBudget
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
                      "comm_bytes_per_step": 6, "step_time_s": 6, "cpu_time_s": 6, "accuracy": 1,
                      "exposed_comm_fraction": 1, "comm_busy_fraction": 1, "peak_rss_mb": 1}
    assert bench.metrics["comm_bytes_per_step"].samples == [0.0] * 6  # one rank: nothing is communicated
    # every step computes: its CPU time is read on the step, not left at zero
    assert all(cpu > 0 for cpu in bench.metrics["cpu_time_s"].samples)
    epochs = zip(bench.metrics["throughput_samples_per_s"].samples, bench.metrics["epoch_time_s"].samples,
                 strict=True)
    assert [round(rate * seconds) for rate, seconds in epochs] == [24, 24]


def test_where_cpu_time_cannot_be_read_the_rest_is_recorded_and_a_note_says_why(world1: None, tmp_path: Path) -> None:
    from pytest_dmlbench.measure.clock import use_cpu_clock

    def unreadable() -> float:
        raise OSError("CLOCK_THREAD_CPUTIME_ID not supported")

    experiment = _experiment(tmp_path, "model: transformer, dataset: tokens, batch_size: 8, epochs: 1, "
                                       "max_batches_per_epoch: 2, comm_rounds: 0")
    bench = RankBench(DistInfo(0, 1, "gloo", "cpu"))
    with use_cpu_clock(unreadable):
        run_experiment(DistInfo(0, 1, "gloo", "cpu"), bench, experiment=experiment)
    assert "cpu_time_s" not in bench.metrics and len(bench.metrics["step_time_s"].samples) == 2
    assert any("cannot read a thread's CPU time" in note for note in bench.notes), bench.notes


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


def test_a_smoke_run_trains_one_step_of_the_smallest_batch_and_one_communication_round(
        world1: None, tmp_path: Path) -> None:
    fields = "model: transformer, dataset: tokens, batch_size: 8, epochs: 3, max_batches_per_epoch: 2, comm_rounds: 2"
    experiment = _experiment(tmp_path, fields)
    smoke = RankBench(DistInfo(0, 1, "gloo", "cpu"), SMOKE_BUDGET)
    run_experiment(DistInfo(0, 1, "gloo", "cpu"), smoke, experiment=experiment)
    counts = {name: len(metric.samples) for name, metric in smoke.metrics.items()}
    assert (counts["epoch_time_s"], counts["step_time_s"], counts["exposed_comm_fraction"]) == (1, 1, 1)
    samples = smoke.metrics["throughput_samples_per_s"].samples[0] * smoke.metrics["epoch_time_s"].samples[0]
    assert round(samples) == SMOKE_SAMPLES_PER_RANK  # one step of the smallest batch (one rank)
    # negative control: without the smoke run the same experiment keeps its epochs, batches and batch size
    full = RankBench(DistInfo(0, 1, "gloo", "cpu"))
    run_experiment(DistInfo(0, 1, "gloo", "cpu"), full, experiment=experiment)
    assert (len(full.metrics["epoch_time_s"].samples), len(full.metrics["step_time_s"].samples)) == (3, 6)
    assert round(full.metrics["throughput_samples_per_s"].samples[0] * full.metrics["epoch_time_s"].samples[0]) == 16


def test_the_smoke_form_keeps_model_dataset_and_strategy_and_splits_over_the_data_ranks(tmp_path: Path) -> None:
    experiment = _experiment(tmp_path, "model: resnet50, dataset: synthetic, strategy: ps, world_size: 4, "
                                       "batch_size: 12, epochs: 2, max_batches_per_epoch: 4, eval_batches: 3, "
                                       "comm_rounds: 0")
    small = smoke_form(experiment, data_ranks=3)  # ps at world size 4: three data ranks
    assert (small.model, small.dataset, small.strategy, small.strategy_options) == (
        experiment.model, experiment.dataset, experiment.strategy, experiment.strategy_options)
    assert (small.batch_size, small.epochs, small.max_batches_per_epoch, small.eval_batches, small.comm_rounds) == (
        3 * SMOKE_SAMPLES_PER_RANK, 1, 1, 1, 0)  # an experiment without communication rounds keeps none


def test_resnet_trains_on_the_smoke_batch(world1: None, tmp_path: Path) -> None:
    """One sample a rank still trains a model with batch normalisation, the path the ResNet experiments take."""
    experiment = _experiment(tmp_path, "model: resnet18, dataset: synthetic, batch_size: 16, comm_rounds: 1")
    bench = RankBench(DistInfo(0, 1, "gloo", "cpu"), SMOKE_BUDGET)
    run_experiment(DistInfo(0, 1, "gloo", "cpu"), bench, experiment=experiment)
    assert len(bench.metrics["step_time_s"].samples) == 1
