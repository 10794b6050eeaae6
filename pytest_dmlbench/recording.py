"""Parent side of metrics: turning what ranks (or local tests) recorded into ``CaseResult`` records."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from pytest_dmlbench.results import Better, CaseResult, MetricResult


def metrics_from_payload(payload: Mapping[str, Any]) -> dict[str, MetricResult]:
    """Metrics a rank sent: ``{"metrics": {name: {"samples": [...], "unit": ..., "better": ...}}}``."""
    found: dict[str, MetricResult] = {}
    for name, entry in dict(payload.get("metrics", {})).items():
        found[name] = MetricResult.of(name, entry["samples"], entry.get("unit"), entry.get("better"))
    return found


def params_of(callspec_params: Mapping[str, Any]) -> dict[str, str]:
    """Parameters as stable strings (what baselines are matched and shown by)."""
    return {str(k): repr(v) if not isinstance(v, str) else v for k, v in callspec_params.items()}


class LocalMetrics:
    """The ``dmlbench_metrics`` fixture: record figures measured in the pytest process itself."""

    def __init__(self) -> None:
        self.metrics: dict[str, MetricResult] = {}

    def record(self, name: str, samples: Iterable[float] | float, *, unit: str | None = None,
               better: Better = None) -> MetricResult:
        """Add a metric (registered names carry their unit and direction; others need ``unit``)."""
        metric = MetricResult.recorded(name, samples, unit, better)
        self.metrics[name] = metric
        return metric


def case_result(nodeid: str, params: dict[str, str], world_size: int, backend: str,
                metrics: dict[str, MetricResult], threshold_pct: float | None,
                extra: dict[str, Any] | None = None) -> CaseResult:
    return CaseResult(nodeid=nodeid, params=params, world_size=world_size, backend=backend,
                      metrics=dict(metrics), threshold_pct=threshold_pct, extra=dict(extra or {}))
