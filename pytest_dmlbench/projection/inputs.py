"""What the projection reads from a results file: collective timings and training cases.

- A **collective case** has an ``op`` parameter naming a modelled collective and the metrics
  ``step_time_s`` (time per operation) and ``algbw_gbps`` (the ``dmlbench.collective`` benchmark); its
  size is ``algbw x time``, exact per round, so the case's size label is never parsed.
- A **training case** has ``step_time_s``, ``exposed_comm_fraction`` (so it ran beside its
  no-communication twin), ``comm_bytes_per_step`` and ``throughput_samples_per_s`` (the
  ``dmlbench.train(..., twin=)`` benchmark). Its compute time per round is the twin's,
  ``T(step) x (1 - exposed_comm_fraction)``, exact per round since both come from the same pair of rounds.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass

from pytest_dmlbench.config import SCALING_ARG
from pytest_dmlbench.projection.collective_model import MODELLED_OPS, Timing
from pytest_dmlbench.results import CaseResult, RunResults
from pytest_dmlbench.results.report import oversubscribed

TRAINING_METRICS = ("step_time_s", "exposed_comm_fraction", "comm_bytes_per_step", "throughput_samples_per_s")


def _median(values: list[float]) -> float:
    finite = [v for v in values if v == v]
    return statistics.median(finite) if finite else float("nan")


def collective_timings(results: RunResults) -> list[Timing]:
    """One median timing per passed collective case."""
    timings = []
    for case in results.cases:
        op = case.params.get("op")
        metrics = case.metrics
        if case.outcome != "passed" or op not in MODELLED_OPS:
            continue
        if "step_time_s" not in metrics or "algbw_gbps" not in metrics:
            continue
        times = metrics["step_time_s"].samples
        sizes = [bw * 1e9 * t for bw, t in zip(metrics["algbw_gbps"].samples, times, strict=False)]
        timings.append(Timing(op, case.world_size, round(_median(sizes)), _median(times)))
    return timings


@dataclass(frozen=True)
class TrainingCase:
    """Medians of one training case: step, compute (twin) time, bytes per step, global batch."""

    nodeid: str
    family: str
    world_size: int
    step_s: float
    compute_s: float
    comm_bytes: float
    global_batch: float
    oversubscribed: bool

    @property
    def per_rank_batch(self) -> float:
        return self.global_batch / self.world_size


def family_of(case: CaseResult) -> str:
    """The case without its world size: the test function and its other parameters."""
    function = case.nodeid.split("[", 1)[0].rsplit("::", 1)[-1]
    others = [str(v) for k, v in sorted(case.params.items()) if k != SCALING_ARG]
    return function + (f"[{'-'.join(others)}]" if others else "")


def training_cases(results: RunResults) -> list[TrainingCase]:
    """Every passed case measured with ``dmlbench.train(..., twin=)`` and counted bytes, with positive
    step and compute times."""
    found = []
    for case in results.cases:
        metrics = case.metrics
        if case.outcome != "passed" or not all(name in metrics for name in TRAINING_METRICS):
            continue
        steps = metrics["step_time_s"].samples
        exposed = metrics["exposed_comm_fraction"].samples
        rates = metrics["throughput_samples_per_s"].samples
        compute = _median([s * (1.0 - e) for s, e in zip(steps, exposed, strict=False)])
        if not (_median(steps) > 0 and compute > 0):
            continue  # no usable timing (a failed or empty measurement)
        found.append(TrainingCase(
            nodeid=case.nodeid,
            family=family_of(case),
            world_size=case.world_size,
            step_s=_median(steps),
            compute_s=compute,
            comm_bytes=_median(metrics["comm_bytes_per_step"].samples),
            global_batch=_median([r * s for r, s in zip(rates, steps, strict=False)]),
            oversubscribed=oversubscribed(case, results),
        ))
    return found
