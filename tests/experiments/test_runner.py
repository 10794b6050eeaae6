"""The rank-side runner on a real one-rank gloo group in this process: what it records, and a training
set too small for one batch as a clear error."""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_dmlbench.bench import RankBench
from pytest_dmlbench.dist_info import DistInfo
from pytest_dmlbench.experiments import Experiment, load_file
from pytest_dmlbench.experiments.runner import run_experiment
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
                      "comm_bytes_per_step": 6, "accuracy": 1, "exposed_comm_fraction": 1,
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
