"""An experiment's training and held-out data (rank side; every rank builds the same tensors).

Synthetic sets hold ``batch_size x max_batches_per_epoch`` training samples and ``batch_size x
eval_batches`` held-out samples drawn from one teacher, so the held-out accuracy measures learning.
CIFAR-10 reads the local training and test batches (never downloads).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import torch

    from pytest_dmlbench.experiments.schema import Experiment


@dataclass
class Splits:
    """Training inputs/targets and held-out inputs/targets."""

    train_x: torch.Tensor
    train_y: torch.Tensor
    eval_x: torch.Tensor
    eval_y: torch.Tensor


def _synthetic(experiment: Experiment, n: int) -> tuple[torch.Tensor, torch.Tensor]:
    from pytest_dmlbench import data

    seed = experiment.seed
    if experiment.dataset == "synthetic_segmentation":
        return data.synthetic_segmentation(n, seed=seed)
    if experiment.dataset == "tokens":
        return data.token_sequences(n, seed=seed)
    if experiment.model == "mlp":
        return data.synthetic_classification(n, seed=seed)
    return data.synthetic_images(n, seed=seed)


def load_splits(experiment: Experiment) -> Splits:
    """The data of ``experiment`` (dataset and model were checked to fit each other at collection)."""
    n_eval = experiment.batch_size * experiment.eval_batches
    if experiment.dataset == "cifar10":
        from pytest_dmlbench.data import load_cifar10

        assert experiment.data_dir is not None, "validation requires data_dir for cifar10"
        train_x, train_y, _ = load_cifar10(experiment.data_dir, train=True)
        eval_x, eval_y, _ = load_cifar10(experiment.data_dir, train=False)
        return Splits(train_x, train_y, eval_x[:n_eval], eval_y[:n_eval])
    n_train = experiment.batch_size * experiment.max_batches_per_epoch
    x, y = _synthetic(experiment, n_train + n_eval)
    return Splits(x[:n_train], y[:n_train], x[n_train:], y[n_train:])
