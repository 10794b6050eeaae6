"""The pytest side of experiment files: a collector per file and one item per experiment run.

An :class:`ExperimentItem` is a ``pytest.Function`` whose body is the framework's rank-side runner bound
to its :class:`~pytest_dmlbench.experiments.schema.Experiment`, marked ``@pytest.mark.dmlbench`` with the
experiment's world size, threshold and timeout. The plugin therefore registers, dispatches, reports,
records and judges it exactly like a hand-written case (``dist`` and ``dmlbench`` are its fixtures).

A framework that brings its own workers (``ray_train``) is not marked: its body runs in the pytest process
and records with the ``dmlbench_metrics`` fixture; :attr:`ExperimentItem.dmlbench_local_run` gives its
result the experiment's world size, backend and threshold. Without Ray installed such an item is skipped,
naming the install command.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from pytest_dmlbench.errors import ExperimentFileError
from pytest_dmlbench.experiments.frameworks import IN_PYTEST_PROCESS, runner_for
from pytest_dmlbench.experiments.loading import load_file
from pytest_dmlbench.experiments.schema import Experiment


class ExperimentItem(pytest.Function):
    """One experiment run; its node id is ``file::name`` (``file::name[key=value-...]`` for a matrix)."""

    def __init__(self, *, experiment: Experiment, line: int = 0, **kwargs: Any) -> None:
        body = functools.partial(runner_for(experiment.framework), experiment=experiment)
        super().__init__(callobj=body, **kwargs)
        self.experiment = experiment
        self.line = line
        self.dmlbench_params = experiment.params()
        if experiment.framework in IN_PYTEST_PROCESS:
            self._mark_in_process(experiment)
            return
        marker: dict[str, Any] = {"world_size": experiment.world_size}
        if experiment.threshold is not None:
            marker["threshold"] = experiment.threshold
        if experiment.timeout is not None:
            marker["timeout"] = experiment.timeout
        if experiment.pair_budget is not None:
            marker["pair_budget"] = experiment.pair_budget
        self.add_marker(pytest.mark.dmlbench(**marker))

    def _mark_in_process(self, experiment: Experiment) -> None:
        from pytest_dmlbench.experiments.ray_cluster import RAY_MISSING, ray_installed

        # (world size, backend, threshold) of the figures recorded in this process, and its pair budget
        self.dmlbench_local_run = (experiment.world_size, "gloo", experiment.threshold)
        self.dmlbench_pair_budget = experiment.pair_budget
        if not ray_installed():
            self.add_marker(pytest.mark.skip(reason=RAY_MISSING))

    def reportinfo(self) -> tuple[Any, int | None, str]:
        return self.path, self.line, f"experiment {self.name}"


def fits_on_ray(item: pytest.Item | None) -> bool:
    """Whether ``item`` is an experiment whose body fits on Ray in this process (``framework: ray_train``)."""
    return isinstance(item, ExperimentItem) and item.experiment.framework in IN_PYTEST_PROCESS


def hand_on_ray(item: pytest.Item, nextitem: pytest.Item | None) -> None:
    """At ``item``'s teardown, the one place a Ray Train item's connection ends: the Ray connection an experiment
    made stays only when ``nextitem`` fits on Ray too (one instance for consecutive Ray Train items: no second
    start, no second wait for Ray's autoscaler); before any other item, or at the end, this process stops being a
    Ray driver."""
    from pytest_dmlbench.experiments.ray_cluster import is_driver_here, shutdown

    if not fits_on_ray(nextitem) and is_driver_here():
        shutdown()


def name_line(path: Path, name: str) -> int:
    """The 0-based line where experiment ``name`` is named in its file (0 when not found)."""
    pattern = re.compile(r"""["']?name["']?\s*:\s*["']?""" + re.escape(name) + r"""(["'\s,}]|$)""")
    for number, text in enumerate(path.read_text(encoding="utf-8").splitlines()):
        if pattern.search(text):
            return number
    return 0


class ExperimentFile(pytest.File):
    """A ``dmlbench_*.yaml`` / ``.yml`` / ``.json`` file; a bad one is a collection error, never a traceback."""

    def __init__(self, *, default_world_size: int, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.default_world_size = default_world_size

    def collect(self) -> Iterator[pytest.Item]:
        shown = self.path.relative_to(self.config.rootpath).as_posix() if self.path.is_relative_to(
            self.config.rootpath) else str(self.path)
        try:
            runs = load_file(self.path, default_world_size=self.default_world_size, shown=shown)
        except ExperimentFileError as exc:
            raise self.CollectError(str(exc)) from None
        for experiment in runs:
            line = name_line(self.path, experiment.name.split("[", 1)[0])
            yield ExperimentItem.from_parent(self, name=experiment.name, experiment=experiment, line=line)
