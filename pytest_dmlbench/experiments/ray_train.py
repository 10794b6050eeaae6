"""``framework: ray_train``: an experiment trained by Ray Train's ``TorchTrainer`` (pytest process side).

The item runs here, in the pytest process, not on the plugin's ranks: it starts (or joins) Ray, fits a
``TorchTrainer`` with ``ScalingConfig(num_workers=world_size)`` whose workers run
:func:`~pytest_dmlbench.experiments.ray_worker.train_loop` on a gloo group of Ray's making, and records the
figures the workers reported (the same names as ``framework: dmlbench``) with ``dmlbench_metrics``, so they
land in the item's case result and are judged like any case. Also recorded: ``ray_fit_time_s``, the wall
time of ``fit()`` (worker start, process group, training, reporting).
"""

from __future__ import annotations

import os
import re
import warnings
from pathlib import Path
from typing import Any

from pytest_dmlbench.config import DEFAULT_TIMEOUT_S
from pytest_dmlbench.experiments.ray_cluster import RAY_MISSING, connect, cpus_per_worker
from pytest_dmlbench.experiments.ray_worker import NOTES_KEY, train_loop
from pytest_dmlbench.experiments.runner import Measured, check_outcome
from pytest_dmlbench.experiments.schema import Experiment
from pytest_dmlbench.items.case_results import LocalMetrics
from pytest_dmlbench.measure.clock import now
from pytest_dmlbench.measure.rounds import BlockBudget

# Where Ray Train keeps the run's checkpoint (the figures); a multi-node cluster needs shared storage here.
STORAGE_ENV = "DMLBENCH_RAY_STORAGE"
RAY_MODULES = r"ray(\.|$)"  # the modules whose deprecation warnings a fit keeps out of the user's summary


def figures_of(metrics: dict[str, Any] | None, experiment: Experiment) -> Measured:
    """The figures rank 0 reported, from Ray Train's Result metrics."""
    if not metrics:
        raise AssertionError(f"experiment {experiment.name}: Ray Train returned no metrics; "
                             "the workers' train loop did not report")
    notes = [str(n) for n in metrics.get(NOTES_KEY, [])]
    figures = {k: v for k, v in metrics.items() if k != NOTES_KEY}
    return Measured(figures, notes)


def fit(experiment: Experiment, storage: str, block: BlockBudget | None = None) -> tuple[Measured, float]:
    """Fit ``experiment`` with a TorchTrainer (in a block of the paired gate, on its budget); its figures
    and the wall time of ``fit()``. The process stays a Ray driver until the teardown of the last of
    consecutive Ray Train items (:func:`~pytest_dmlbench.experiments.collect.hand_on_ray`)."""
    try:
        from ray.train import RunConfig, ScalingConfig
        from ray.train.torch import TorchConfig, TorchTrainer
    except ImportError as exc:
        raise ImportError(f"{RAY_MISSING} ({exc})") from exc

    connection = connect()
    cpus = cpus_per_worker(connection.cpus, experiment.world_size)
    timeout = experiment.timeout if experiment.timeout is not None else DEFAULT_TIMEOUT_S
    trainer = TorchTrainer(
        train_loop,
        train_loop_config={"experiment": experiment, "threads": max(1, int(cpus)), "block": block},
        scaling_config=ScalingConfig(num_workers=experiment.world_size, use_gpu=False,
                                     resources_per_worker={"CPU": cpus}),
        torch_config=TorchConfig(backend="gloo", timeout_s=max(1, round(timeout))),
        run_config=RunConfig(name=re.sub(r"[^A-Za-z0-9_.-]+", "_", experiment.name), storage_path=storage),
    )
    start = now()
    with warnings.catch_warnings():
        # Ray's own modules warn about Ray's own deprecated settings; nothing a user of the plugin can act on
        warnings.filterwarnings("ignore", category=DeprecationWarning, module=RAY_MODULES)
        result = trainer.fit()
    elapsed = now() - start
    if result.error is not None:
        raise result.error
    return figures_of(result.metrics, experiment), elapsed


def run_ray_train(dmlbench_metrics: LocalMetrics, tmp_path: Path, *, experiment: Experiment) -> None:
    """The item body: fit the experiment with Ray Train and record its figures in this process."""
    storage = os.environ.get(STORAGE_ENV) or str(tmp_path / "ray_results")
    measured, fit_time = fit(experiment, storage, dmlbench_metrics.block)
    for name, samples in measured.figures.items():
        dmlbench_metrics.record(name, samples)
    dmlbench_metrics.record("ray_fit_time_s", fit_time, unit="s", better="lower")
    dmlbench_metrics.notes.extend(measured.notes)
    check_outcome(experiment, measured.losses, measured.accuracy, dmlbench_metrics.block)
