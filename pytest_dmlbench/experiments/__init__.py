"""Experiment files as cases: ``dmlbench_*.yaml`` / ``.yml`` / ``.json`` describe training runs
(model, dataset, strategy, world size, batch size, epochs, ...) that the plugin collects as test items and
runs on its rank worlds like any ``@pytest.mark.dmlbench`` case.

Modules: :mod:`.fields` (the field table), :mod:`.schema` (validating one experiment), :mod:`.matrix`
(expanding ``matrix:``), :mod:`.loading` (reading a file), :mod:`.frameworks` (which rank-side runner
an experiment uses), :mod:`.collect` (the pytest collector and item), :mod:`.runner` and
:mod:`.datasets` (what runs on the ranks), and for ``framework: ray_train`` :mod:`.ray_train` (the item
body in the pytest process), :mod:`.ray_cluster` (the Ray instance) and :mod:`.ray_worker` (Ray Train's
worker loop).
"""

from __future__ import annotations

from pytest_dmlbench.errors import ExperimentFileError
from pytest_dmlbench.experiments.loading import FILE_PATTERNS, is_experiment_file, load_file
from pytest_dmlbench.experiments.schema import Experiment

__all__ = ["FILE_PATTERNS", "Experiment", "ExperimentFileError", "is_experiment_file", "load_file"]
