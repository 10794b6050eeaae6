"""What the figures read from results: short case labels, medians, strategies and world sizes."""

from __future__ import annotations

import re
from collections.abc import Sequence

from pytest_dmlbench.config import SCALING_ARG
from pytest_dmlbench.results import CaseResult, RunResults
from pytest_dmlbench.results.units import natural_key

_WS_ID = re.compile(r"(^|-)ws\d+(?=-|$)")


def case_label(case: CaseResult) -> str:
    """The test name and parameter id without the file (``strategy_training[ddp]``)."""
    name = case.nodeid.rsplit("::", 1)[-1]
    return name[5:] if name.startswith("test_") else name


def labelled(case: CaseResult) -> str:
    """:func:`case_label` with the world size appended unless the id already names it."""
    label = case_label(case)
    return label if _WS_ID.search(label.partition("[")[2].rstrip("]")) else f"{label} ws{case.world_size}"


def quartiles_of(samples: Sequence[float]) -> tuple[float, float, float]:
    """First quartile, median and third quartile of the finite samples (NaN when there are none)."""
    import numpy as np

    finite = [s for s in samples if s == s]
    if not finite:
        return (float("nan"),) * 3
    q1, q2, q3 = np.percentile(finite, [25, 50, 75])
    return float(q1), float(q2), float(q3)


def series_label(case: CaseResult) -> str:
    """A case's label with its world-size part removed: the same strategy at every world size."""
    label = case_label(case)
    head, bracket, rest = label.partition("[")
    if not bracket:
        return label
    params = _WS_ID.sub("", rest.rstrip("]")).strip("-")
    return f"{head}[{params}]" if params else head


def median(case: CaseResult, metric: str) -> float | None:
    found = case.metrics.get(metric)
    if found is None:
        return None
    value = found.stats.median
    return value if value == value else None


def latest(runs: Sequence[RunResults]) -> RunResults:
    """The run the single-run figures describe: the last one given."""
    return runs[-1]


def ordered(cases: Sequence[CaseResult]) -> list[CaseResult]:
    return sorted(cases, key=lambda c: natural_key(c.nodeid))


def world_size_of(case: CaseResult) -> int:
    value = case.params.get(SCALING_ARG)
    return int(value) if value is not None and value.isdigit() else case.world_size
