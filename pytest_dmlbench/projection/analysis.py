"""Calibrate the network on a results file, project its training cases and check the model on them.

- :func:`calibrate`: alpha and beta of every modelled collective in the results; the projection uses one
  of them (``all_reduce`` by default, the exchange data-parallel training performs), or values given.
- :func:`workloads`: one :class:`~.model.Workload` per case family (a case without its world size):
  compute time and per-rank batch from the family's smallest measured world size, gradient bytes from its
  largest (a one-rank step exchanges nothing).
- :func:`validate`: predicted against measured step time and speedup for every measured training case.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from pytest_dmlbench.errors import ProjectionError
from pytest_dmlbench.projection.collective_model import MODELLED_OPS, AlphaBeta, FitError, Timing, fit
from pytest_dmlbench.projection.inputs import TrainingCase, collective_timings, training_cases
from pytest_dmlbench.projection.model import DEFAULT_BACKWARD_SHARE, Network, Workload, messages_for, project
from pytest_dmlbench.results import RunResults


@dataclass(frozen=True)
class Calibration:
    """Every collective's fit, and the network the projection uses with where it came from."""

    fits: dict[str, AlphaBeta]
    skipped: dict[str, str]
    network: Network
    source: str
    by_world_size: dict[tuple[str, int], AlphaBeta] = field(default_factory=dict)


def calibrate(results: RunResults, *, op: str = "all_reduce", latency_us: float | None = None,
              bandwidth_gbps: float | None = None) -> Calibration:
    """Fit alpha and beta per collective; take ``op``'s for the projection unless both are given."""
    timings = collective_timings(results)
    fits: dict[str, AlphaBeta] = {}
    skipped: dict[str, str] = {}
    for name in MODELLED_OPS:
        if any(t.op == name for t in timings):
            try:
                fits[name] = fit(name, timings)
            except FitError as exc:
                skipped[name] = str(exc)
    by_world_size = _fits_by_world_size(timings)
    given_alpha = None if latency_us is None else latency_us / 1e6
    given_beta = None if bandwidth_gbps is None else 1.0 / (bandwidth_gbps * 1e9)
    if given_alpha is not None and given_beta is not None:
        return Calibration(fits, skipped, Network(given_alpha, given_beta), "given (--latency-us, --bandwidth-gbps)",
                           by_world_size)
    if op not in fits:
        why = skipped.get(op) or (
            "the results hold no collective cases" if not timings else f"the results hold no {op} cases"
        )
        raise ProjectionError(
            f"cannot calibrate the network: {why}.\nRecord collective timings in the same run, e.g. "
            "`pytest --dmlbench --world-size 4 bench_cases/test_collectives.py bench_cases/"
            "test_training_benchmarks.py --dmlbench-json RESULTS.json`, or give both --latency-us and "
            "--bandwidth-gbps."
        )
    fitted = fits[op]
    alpha = fitted.alpha_s if given_alpha is None else given_alpha
    beta = fitted.beta_s_per_byte if given_beta is None else given_beta
    if alpha < 0 or beta <= 0:
        raise ProjectionError(
            f"the {op} fit is not physical (latency {fitted.alpha_s * 1e6:.3g} us, time per byte "
            f"{fitted.beta_s_per_byte:.3g} s): its timings are too noisy or cover too few sizes. Measure more "
            "sizes or rounds, or give --latency-us and --bandwidth-gbps."
        )
    source = f"fit of {op}" + ("; latency given" if given_alpha is not None else "") + (
        "; bandwidth given" if given_beta is not None else "")
    return Calibration(fits, skipped, Network(alpha, beta), source, by_world_size)


def _fits_by_world_size(timings: list[Timing]) -> dict[tuple[str, int], AlphaBeta]:
    """A separate fit per collective and world size (where two sizes or more were measured): how far the
    network seen by a few ranks depends on how many share the machine."""
    found = {}
    pairs = {(t.op, t.world_size) for t in timings if t.world_size > 1}
    for op, p in sorted(pair for pair in pairs if sum(other[0] == pair[0] for other in pairs) > 1):
        try:
            found[(op, p)] = fit(op, [t for t in timings if t.world_size == p])
        except FitError:
            continue
    return found


@dataclass(frozen=True)
class Family:
    """The measured cases of one family (sorted by world size) and the workload projected from them."""

    name: str
    cases: tuple[TrainingCase, ...]
    workload: Workload

    @property
    def base(self) -> TrainingCase:
        return self.cases[0]


def workloads(results: RunResults, *, messages: int | None = None) -> list[Family]:
    """One family per training case without its world size; raises when the results hold none."""
    grouped: dict[str, list[TrainingCase]] = {}
    for case in training_cases(results):
        grouped.setdefault(case.family, []).append(case)
    if not grouped:
        raise ProjectionError(
            "the results hold no training cases measured beside a no-communication twin with counted bytes "
            "(metrics step_time_s, exposed_comm_fraction, comm_bytes_per_step, throughput_samples_per_s).\n"
            "Benchmark training with `dmlbench.train(strategy, batches, ..., twin=strategy.twin())`, e.g. "
            "bench_cases/test_training_benchmarks.py."
        )
    families = []
    for name, cases in sorted(grouped.items()):
        cases.sort(key=lambda c: c.world_size)
        base, widest = cases[0], cases[-1]
        grad = widest.comm_bytes
        families.append(Family(name, tuple(cases), Workload(
            compute_s=base.compute_s,
            grad_bytes=grad,
            messages=messages if messages is not None else messages_for(grad),
            per_rank_batch=base.per_rank_batch,
        )))
    return families


@dataclass(frozen=True)
class Check:
    """One measured case against the model (``algorithm``): step times and, where a one-rank case of the
    family exists, speedup. ``own`` predictions take the compute time of the case's own twin; ``base``
    predictions take the family's smallest world size (what a projection to more ranks does)."""

    nodeid: str
    world_size: int
    oversubscribed: bool
    measured_step_s: float
    own_step_s: float
    own_step_overlap_s: float
    base_step_s: float
    base_step_overlap_s: float
    measured_speedup: float | None
    base_speedup: float | None
    base_speedup_overlap: float | None

    @staticmethod
    def error(predicted: float | None, measured: float | None) -> float | None:
        """Relative error ``predicted / measured - 1``."""
        if predicted is None or measured is None or measured == 0:
            return None
        return predicted / measured - 1.0


def validate(families: Sequence[Family], net: Network, algorithm: str = "ring", *,
             backward_share: float = DEFAULT_BACKWARD_SHARE) -> list[Check]:
    """Predicted against measured figures for every measured training case."""
    checks = []
    for family in families:
        work = family.workload
        one_rank = family.base if family.base.world_size == 1 else None
        for case in family.cases:
            p = case.world_size
            own = Workload(case.compute_s, work.grad_bytes, work.messages, case.per_rank_batch)
            own_plain, own_overlap = (project(own, net, algorithm, p, overlap=o, backward_share=backward_share)
                                      for o in (False, True))
            base_plain, base_overlap = (project(work, net, algorithm, p, overlap=o, backward_share=backward_share)
                                        for o in (False, True))
            measured_speedup = None
            if one_rank is not None:
                measured_speedup = (p * case.per_rank_batch / case.step_s) / (one_rank.per_rank_batch / one_rank.step_s)
            checks.append(Check(
                nodeid=case.nodeid,
                world_size=p,
                oversubscribed=case.oversubscribed,
                measured_step_s=case.step_s,
                own_step_s=own_plain.step_s,
                own_step_overlap_s=own_overlap.step_s,
                base_step_s=base_plain.step_s,
                base_step_overlap_s=base_overlap.step_s,
                measured_speedup=measured_speedup,
                base_speedup=base_plain.speedup if one_rank is not None else None,
                base_speedup_overlap=base_overlap.speedup if one_rank is not None else None,
            ))
    return checks
