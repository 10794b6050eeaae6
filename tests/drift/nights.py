"""Nightly results files for the drift tests: one case whose step time follows given levels."""

from __future__ import annotations

from pathlib import Path

from pytest_dmlbench.results import RunResults
from pytest_dmlbench.results.jsonio import write_results
from tests.results.casefactory import make_case, make_run

NODEID = "bench_cases/test_ddp.py::test_step[ddp]"


def night_results(day: int, level: float, commit: str, ratio: float | None = None) -> RunResults:
    """A night on 2026-11-``day`` whose step time's median is about ``level`` x 10 ms; with ``ratio``, the
    case also records paired block medians (A's over B's equal to ``ratio`` in every pair)."""
    case = make_case(NODEID, step_median=0.010 * level, seed=day)
    if ratio is not None:
        b = [0.010, 0.011, 0.009, 0.010]
        case.extra["paired"] = {"commit": "f" * 40, "block_medians": [
            {"a_first": [True, False, True, False], "a": {"step_time_s": [x * ratio for x in b]},
             "b": {"step_time_s": b}}]}
    run = make_run([case])
    run.created = f"2026-11-{day:02d}T03:17:00+00:00"
    run.run["commit"] = commit
    return run


def write_nights(folder: Path, levels: list[float]) -> list[Path]:
    """One results file per level, a night apart, each with its own commit."""
    paths = []
    for index, level in enumerate(levels):
        path = folder / f"results-{index:02d}.json"
        write_results(path, night_results(index + 1, level, f"{index + 1:02x}" * 20))
        paths.append(path)
    return paths
