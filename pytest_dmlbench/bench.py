"""The ``dmlbench`` fixture's value on a rank (placeholder timing until the measurement runner lands)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pytest_dmlbench.dist_info import DistInfo


class RankBench:
    """Times callables in rank-agreed rounds and records metrics for the parent."""

    def __init__(self, dist: DistInfo, options: dict[str, Any]) -> None:
        self.dist = dist
        self.options = options
        self.metrics: dict[str, dict[str, Any]] = {}

    def begin_case(self, *, measure_memory: bool) -> None:
        pass

    def end_case(self) -> None:
        pass

    def payload(self) -> dict[str, Any]:
        return {"metrics": self.metrics} if self.metrics else {}

    def __call__(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        return fn(*args, **kwargs)
