"""Which rank-side runner trains an experiment: the ``framework`` field names one.

A runner is ``fn(dist, dmlbench, *, experiment) -> None`` and runs on every rank of the world, like a case
body. ``dmlbench`` (the default) trains with :mod:`pytest_dmlbench.strategies`; another engine (e.g. Ray
Train) plugs in by adding its ``module:function`` here. Modules are imported on first use only.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any

RUNNERS: dict[str, str] = {
    "dmlbench": "pytest_dmlbench.experiments.runner:run_experiment",
}


def runner_for(framework: str) -> Callable[..., Any]:
    """The runner function of ``framework`` (a name of :data:`RUNNERS`)."""
    if framework not in RUNNERS:
        raise KeyError(f"unknown framework {framework!r}; accepted: {', '.join(RUNNERS)}")
    module, _, name = RUNNERS[framework].partition(":")
    runner: Callable[..., Any] = getattr(importlib.import_module(module), name)
    return runner
