"""An experiment's own checks fail on a run that diverged or did not learn, and pass on one that learned."""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_dmlbench.experiments import Experiment, load_file
from pytest_dmlbench.experiments.runner import check_outcome


@pytest.fixture
def experiment(tmp_path: Path) -> Experiment:
    path = tmp_path / "dmlbench_c.yaml"
    path.write_text("experiments:\n  - {name: c, model: mlp, epochs: 2, min_accuracy: 0.5}\n")
    return load_file(path, default_world_size=2)[0]


def test_learned_run_passes(experiment: Experiment) -> None:
    check_outcome(experiment, [2.3, 1.1], accuracy=0.7)


def test_low_accuracy_fails_with_the_figures(experiment: Experiment) -> None:
    with pytest.raises(AssertionError, match=r"^experiment c: held-out accuracy 0\.120 < min_accuracy 0\.5 after "
                       r"2 epoch\(s\); epoch losses 2\.3000, 2\.3000: the model did not learn$"):
        check_outcome(experiment, [2.3, 2.3], accuracy=0.12)


def test_diverged_loss_fails(experiment: Experiment) -> None:
    with pytest.raises(AssertionError, match=r"training loss is nan in epoch 2 \(lr 0\.01\): training diverged"):
        check_outcome(experiment, [2.3, float("nan")], accuracy=0.9)
