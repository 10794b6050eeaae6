"""Results built in code for the figure tests, and rendering that turns every warning into an error."""

from __future__ import annotations

import warnings
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

import pytest

pytest.importorskip("matplotlib", reason="plots need matplotlib: pip install -e '.[test]'")

from pytest_dmlbench.plots.figure import Figure, Skipped
from pytest_dmlbench.results import CaseResult, MetricResult, RunResults, Verdict


def case(nodeid: str, world_size: int = 2, params: dict[str, str] | None = None, threshold_pct: float | None = None,
         **metrics: Sequence[float]) -> CaseResult:
    """A passed case with the given metrics' samples."""
    result = CaseResult(nodeid, dict(params or {}), world_size, "gloo", threshold_pct=threshold_pct)
    for name, samples in metrics.items():
        result.add(MetricResult.of(name, samples))
    return result


def run(*cases: CaseResult, created: str = "2026-11-22T10:00:00+00:00", commit: str | None = None,
        threshold_pct: float = 5.0) -> RunResults:
    facts: dict[str, object] = {"world_size": 2, "threshold_pct": threshold_pct}
    if commit:
        facts["commit"] = commit
    return RunResults(machine={"cpu_model": "test"}, created=created, run=facts, cases=list(cases))


def verdict(metric: str, kind: str, baseline: float, current: float, threshold_pct: float = 5.0) -> Verdict:
    return Verdict(metric, kind, baseline, current, current / baseline, threshold_pct, 0.01,  # type: ignore[arg-type]
                   f"{metric}: {kind}", change=f"{(current / baseline - 1):+.1%}")


@contextmanager
def no_warnings() -> Iterator[None]:
    """Any warning raised inside (matplotlib's "No artists with labels" among them) is an error."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        yield


def drawn(result: list[Figure] | Skipped) -> list[Figure]:
    assert not isinstance(result, Skipped), result
    return result


def y_ticks_in_view(ax: object) -> list[float]:
    """The major y ticks that lie inside the axes' y range (what the reader sees)."""
    low, high = sorted(ax.get_ylim())  # type: ignore[attr-defined]
    return [t for t in ax.get_yticks() if low <= t <= high]  # type: ignore[attr-defined]


@pytest.fixture
def out(tmp_path: Path) -> Path:
    return tmp_path / "plots"
