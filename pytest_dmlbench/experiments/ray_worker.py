"""The Ray Train worker loop of ``framework: ray_train`` (runs in Ray's workers; no pytest import).

Ray Train has initialised the default gloo process group; the experiment trains, evaluates and measures
exactly as on the plugin's ranks (:func:`~pytest_dmlbench.experiments.runner.measure_experiment`), and
every worker reports the same rank-agreed figures under the same metric names with ``ray.train.report``.
Rank 0 attaches a small checkpoint (the figures as JSON), because Ray Train keeps a run's metrics in its
Result only together with a checkpoint.
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

FIGURES_FILE = "dmlbench_figures.json"
NOTES_KEY = "dmlbench_notes"


def train_loop(config: dict[str, Any]) -> None:
    """``train_loop_per_worker`` of the TorchTrainer: ``config`` holds ``experiment``, ``threads`` and
    ``block`` (the paired gate's block budget, or None)."""
    import ray.train
    import torch
    import torch.distributed as td
    from ray.train.torch import get_device

    from pytest_dmlbench.experiments.runner import measure_experiment

    torch.set_num_threads(int(config["threads"]))
    measured = measure_experiment(config["experiment"], td.get_rank(), td.get_world_size(), get_device(),
                                  config.get("block"))
    metrics: dict[str, Any] = {**measured.figures, NOTES_KEY: measured.notes}
    if td.get_rank() != 0:
        ray.train.report(metrics)
        return
    with tempfile.TemporaryDirectory() as folder:
        (Path(folder) / FIGURES_FILE).write_text(json.dumps(metrics))
        ray.train.report(metrics, checkpoint=ray.train.Checkpoint.from_directory(folder))
