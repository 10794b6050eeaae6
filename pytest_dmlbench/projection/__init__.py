"""Alpha-beta projection of data-parallel training to many ranks, calibrated on a results file.

:mod:`.collective_model` fits latency and bandwidth per collective, :mod:`.inputs` reads collective and
training cases, :mod:`.model` holds the exchange and step-time formulas, :mod:`.analysis` calibrates,
projects and checks the model against what was measured, :mod:`.holdout` checks the collective model on
measurements it was not fitted on, :mod:`.tables` and :mod:`.plot` show it and
:mod:`.command` is ``python -m pytest_dmlbench project``.
"""

from __future__ import annotations

from pytest_dmlbench.errors import ProjectionError
from pytest_dmlbench.projection.analysis import (
           Calibration,
           Check,
           Family,
           calibrate,
           validate,
           workloads,
)
from pytest_dmlbench.projection.collective_model import AlphaBeta, Timing, coefficients, fit
from pytest_dmlbench.projection.holdout import HeldOut, held_out, median_error
from pytest_dmlbench.projection.model import ALGORITHMS, Network, Projection, Workload, exchange_time, project

__all__ = ["ALGORITHMS", "AlphaBeta", "Calibration", "Check", "Family", "HeldOut", "Network", "Projection",
           "ProjectionError", "Timing", "Workload", "calibrate", "coefficients", "exchange_time", "fit",
           "held_out", "median_error", "project", "validate", "workloads"]
