"""Which runner trains an experiment: the ``framework`` field names one.

A rank-side runner is ``fn(dist, dmlbench, *, experiment) -> None`` and runs on every rank of the world,
like a case body. ``dmlbench`` (the default) trains with :mod:`pytest_dmlbench.strategies`. A framework
that brings its own workers (``ray_train``) runs in the pytest process instead: it is listed in
:data:`IN_PYTEST_PROCESS`, its runner takes pytest fixtures (``dmlbench_metrics`` ...) and is not dispatched
to a rank world. Modules are imported on first use only.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any

RUNNERS: dict[str, str] = {
    "dmlbench": "pytest_dmlbench.experiments.runner:run_experiment",
    "ray_train": "pytest_dmlbench.experiments.ray_train:run_ray_train",
}
IN_PYTEST_PROCESS = frozenset({"ray_train"})


def runner_for(framework: str) -> Callable[..., Any]:
    """The runner function of ``framework`` (a name of :data:`RUNNERS`)."""
    if framework not in RUNNERS:
        raise KeyError(f"unknown framework {framework!r}; accepted: {', '.join(RUNNERS)}")
    module, _, name = RUNNERS[framework].partition(":")
    runner: Callable[..., Any] = getattr(importlib.import_module(module), name)
    return runner
