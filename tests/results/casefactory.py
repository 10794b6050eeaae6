"""Builders of realistic results for the baseline tests (lognormal step times like real timings)."""

from __future__ import annotations

from typing import Any

import numpy as np

from pytest_dmlbench.results import CaseResult, MetricResult, RunResults

MACHINE: dict[str, Any] = {
    "cpu_model": "Intel(R) Xeon(R) Processor",
    "logical_cores": 2,
    "memory_gib": 24,
    "os": "Linux",
    "kernel": "6.1.0",
    "machine": "x86_64",
    "python": "3.11.9",
    "torch": "2.14.1+cpu",
    "cuda": None,
    "nccl": None,
    "gpus": [],
    "backend": "gloo",
    "cpu_mhz": 2300.0,
}


def step_samples(median: float, rounds: int, seed: int, spread: float = 0.03) -> list[float]:
    rng = np.random.default_rng(seed)
    return [float(x) for x in median * np.exp(rng.normal(0.0, spread, rounds))]


def make_case(
    nodeid: str = "bench_cases/test_ddp.py::test_step[ddp]",
    step_median: float = 0.010,
    rounds: int = 20,
    seed: int = 0,
    threshold_pct: float | None = None,
    world_size: int = 4,
) -> CaseResult:
    case = CaseResult(nodeid, {"strategy": "ddp"}, world_size, "gloo", threshold_pct=threshold_pct)
    steps = step_samples(step_median, rounds, seed)
    case.add(MetricResult.of("step_time_s", steps))
    case.add(MetricResult.of("throughput_samples_per_s", [64 / s for s in steps]))
    case.add(MetricResult.of("compute_comm_ratio", [3.0] * rounds))
    case.add(MetricResult.of("peak_rss_mb", [512.0 + seed % 3] * rounds))
    return case


def make_run(cases: list[CaseResult], xdist_workers: int = 0) -> RunResults:
    return RunResults(
        machine=dict(MACHINE),
        created="2026-11-22T10:00:00+00:00",
        run={"world_size": 4, "xdist_workers": xdist_workers, "cores": 2},
        cases=cases,
    )
