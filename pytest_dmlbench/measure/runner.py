"""The benchmark runner: time a callable, or a training strategy against its no-communication twin.

Both forms run rank-agreed rounds (:mod:`pytest_dmlbench.measure.rounds`): each round starts at a barrier,
is timed on every rank with :func:`~pytest_dmlbench.measure.clock.now`, and its sample is the max over
ranks, so the returned samples are identical on every rank. Beside that wall time each round reads the CPU
time the ranks spent on the step (:func:`~pytest_dmlbench.measure.clock.cpu_now`, summed over ranks:
:mod:`pytest_dmlbench.measure.cpu_time`). Only the callable (and, on CUDA, a device
synchronisation) lies between the two clock readings of a round; the barrier and the exchange of results
happen outside the timed span.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from pytest_dmlbench.measure.clock import now
from pytest_dmlbench.measure.comm import CommCounter, instrument_collectives
from pytest_dmlbench.measure.cpu_time import CpuReader
from pytest_dmlbench.measure.flops import FlopCount
from pytest_dmlbench.measure.rounds import RankSync, RoundPlan, run_rounds
from pytest_dmlbench.measure.work_counts import FLOPS, KINDS, WorkCount, agree, called_kinds, kind_counts, step_counters
from pytest_dmlbench.results import MetricResult, calls_metric
from pytest_dmlbench.results.stats import median


def _synchronizer(device: Any) -> Callable[[], None] | None:
    """A function that waits for queued device work, or None on CPU."""
    if device is None:
        return None
    import torch

    device = torch.device(device)
    if device.type != "cuda":
        return None
    return lambda: torch.cuda.synchronize(device)


@dataclass
class TimedCall:
    """Per-round step times (max over ranks, identical on all ranks), the ranks' CPU time per step (summed
    over ranks; empty where it cannot be read) and the callable's last result."""

    samples: list[float]
    result: Any
    iterations: int
    cpu_samples: list[float] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    counters: dict[str, float] = field(default_factory=dict)  # one call's work counters, agreed over ranks

    def metrics(self) -> dict[str, MetricResult]:
        metrics = {"step_time_s": MetricResult.of("step_time_s", self.samples)}
        if self.cpu_samples:
            metrics["cpu_time_s"] = MetricResult.of("cpu_time_s", self.cpu_samples)
        metrics.update({name: MetricResult.of(name, [value]) for name, value in called_kinds(self.counters).items()})
        return metrics


def time_callable(
    fn: Callable[..., Any],
    args: Sequence[Any] = (),
    kwargs: Mapping[str, Any] | None = None,
    *,
    plan: RoundPlan | None = None,
    iterations: int = 1,
    device: Any = None,
    group: Any = None,
) -> TimedCall:
    """Time ``fn(*args, **kwargs)`` in rank-agreed rounds on every rank of ``group``.

    Each round calls ``fn`` ``iterations`` times back to back (for callables too short to time singly)
    and records the elapsed time divided by ``iterations``. The first warm-up round is not timed but counted
    (:class:`~pytest_dmlbench.measure.work_counts.WorkCount`): one call's collective calls in total and by kind,
    bytes (as every rank counts them; the mean over ranks where ranks differ) and FLOPs (summed over ranks); the
    timed rounds run uninstrumented. Every rank must call this with the same plan.
    """
    if iterations < 1:
        raise ValueError(f"iterations must be >= 1, got {iterations}")
    plan = plan if plan is not None else RoundPlan()
    kwargs = dict(kwargs or {})
    sync_device = _synchronizer(device)
    last: list[Any] = [None]
    cpu = CpuReader.for_rank()
    sync = RankSync(group)
    work = WorkCount(enabled=plan.warmup > 0)

    def calls() -> None:
        for _ in range(iterations):
            last[0] = fn(*args, **kwargs)
        if sync_device is not None:
            sync_device()

    def body() -> tuple[float, float]:
        if work.pending:  # the first warm-up round: counted, never timed
            work.count(calls, iterations)
            return 0.0, 0.0
        start, cpu_start = now(), cpu.read()
        calls()
        return (now() - start) / iterations, (cpu.read() - cpu_start) / iterations

    rows = run_rounds(body, plan, width=2, sync=sync, summed=1)
    notes = [cpu.missing] if cpu.missing else []
    agreement = work.agreed(sync)
    notes += [note for note in (agreement.note, work.missing_note()) if note is not None]
    return TimedCall(samples=[row[0] for row in rows], result=last[0], iterations=iterations,
                     cpu_samples=[row[1] for row in rows] if cpu.readable else [], notes=notes,
                     counters=agreement.values)


class Steppable(Protocol):
    """Anything with a training step (a :class:`pytest_dmlbench.strategies.Strategy`, or a test double)."""

    def step(self, inputs: Any, targets: Any, loss_fn: Callable[..., Any]) -> float: ...


StepFn = Callable[[Any, Any, Callable[..., Any]], float]


def _step_fn(strategy: Steppable | StepFn, role: str) -> StepFn:
    step: StepFn | None = getattr(strategy, "step", None)
    if callable(step):
        return step
    if callable(strategy):
        return strategy
    raise TypeError(
        f"{role} must have a .step(inputs, targets, loss_fn) method or be callable; got {strategy!r}"
    )


@dataclass
class TrainingResult:
    """Every training metric of one benchmark, plus what a report may want to show beside them.

    ``exposed_comm_fraction`` samples are per pair of rounds, ``1 - T(twin)/T(step)``;
    ``exposed_comm_fraction_of_medians`` is ``1 - median T(twin) / median T(step)``.
    """

    metrics: dict[str, MetricResult]
    losses: list[float]
    exposed_comm_fraction_of_medians: float | None
    twin_time_s: list[float] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def unseen_communication(strategy: object) -> str | None:
    """Why the collective instrumentation cannot see ``strategy``'s communication, or None.

    DDP without a Python communication hook all-reduces its buckets inside its C++ reducer.
    """
    from torch.nn.parallel import DistributedDataParallel

    model = getattr(strategy, "model", None)
    if isinstance(model, DistributedDataParallel) and getattr(model, "_comm_hooks", None) == []:
        return (
            "DDP without a Python communication hook all-reduces in C++, out of sight of the collective "
            "instrumentation: comm_bytes_per_step and comm_busy_fraction are not reported. Register "
            "pytest_dmlbench.measure.comm.counting_comm_hook() on the model to count them."
        )
    return None


def benchmark_training(
    strategy: Steppable | StepFn,
    batches: Iterable[tuple[Any, Any]],
    *,
    global_batch_size: int,
    loss_fn: Callable[..., Any],
    twin: Steppable | StepFn | None = None,
    plan: RoundPlan | None = None,
    device: Any = None,
    group: Any = None,
) -> TrainingResult:
    """Benchmark training steps of ``strategy`` on this rank's ``batches`` (cycled, one batch per step).

    With a ``twin`` (the same step without communication, e.g. DDP with ``noop_hook``), every round is a
    pair: the step and the twin on the same batch, each started at a barrier, the order alternating from
    round to round so that drift and order effects cancel. Metrics: ``step_time_s``, ``cpu_time_s`` (the
    ranks' CPU time on the step, summed over ranks),
    ``throughput_samples_per_s`` (``global_batch_size`` / step time), ``comm_busy_fraction``,
    ``comm_bytes_per_step``, ``collective_calls_per_step`` and the calls of each kind a step makes,
    ``collective_calls_per_step.<kind>`` (instrumented collectives; where ranks count differently, the mean over
    ranks, with a note naming each rank's count: :mod:`.work_counts`; left out, with a note, for DDP without a
    Python communication hook, whose traffic is invisible),
    ``flops_per_step`` (summed over ranks, counted in the first warm-up round: :mod:`.flops`), and with a
    twin ``exposed_comm_fraction`` and ``compute_comm_ratio`` (``T(twin) / (T(step) - T(twin))``, inf when
    nothing is exposed).
    """
    if global_batch_size < 1:
        raise ValueError(f"global_batch_size must be >= 1, got {global_batch_size}")
    batch_list = list(batches)
    if not batch_list:
        raise ValueError("benchmark_training needs at least one (inputs, targets) batch for this rank")
    plan = plan if plan is not None else RoundPlan()
    step = _step_fn(strategy, "strategy")
    twin_step = _step_fn(twin, "twin") if twin is not None else None
    sync = RankSync(group)
    sync_device = _synchronizer(device)
    cycle = itertools.cycle(batch_list)
    counter = CommCounter()
    losses: list[float] = []
    pair_index = itertools.count()
    cpu = CpuReader.for_rank()

    def timed(fn: StepFn, inputs: Any, targets: Any) -> tuple[float, float, float]:
        start, cpu_start = now(), cpu.read()
        loss = fn(inputs, targets, loss_fn)
        if sync_device is not None:
            sync_device()
        return now() - start, cpu.read() - cpu_start, float(loss)

    flops = FlopCount(enabled=plan.warmup > 0)
    counted: list[dict[str, float]] = []  # this rank's counters of every round, warm-up included

    def body() -> tuple[float, ...]:
        inputs, targets = next(cycle)
        twin_first = twin_step is not None and next(pair_index) % 2 == 1
        twin_time = 0.0
        if twin_first and twin_step is not None:
            twin_time, _, _ = timed(twin_step, inputs, targets)
            sync.barrier()
        counter.reset()
        if flops.pending:  # the first warm-up round's step, counted and never timed
            with flops.counting():
                step_time, step_cpu, loss = timed(step, inputs, targets)
        else:
            step_time, step_cpu, loss = timed(step, inputs, targets)
        busy, nbytes, calls, kinds = counter.busy_s, counter.bytes, counter.calls, kind_counts(counter)
        counted.append(step_counters(counter, flops=flops.value))
        if not twin_first and twin_step is not None:
            sync.barrier()
            twin_time, _, _ = timed(twin_step, inputs, targets)
        losses.append(loss)
        return (step_time, twin_time, busy / step_time if step_time > 0 else 0.0, float(nbytes), float(calls),
                *kinds, step_cpu, flops.value)

    with instrument_collectives(counter):
        rows = run_rounds(body, plan, width=7 + len(KINDS), sync=sync, summed=2)
    cpu_at, flops_at = 5 + len(KINDS), 6 + len(KINDS)
    step_times = [r[0] for r in rows]
    twin_times = [r[1] for r in rows]

    metrics = {
        "step_time_s": MetricResult.of("step_time_s", step_times),
        "throughput_samples_per_s": MetricResult.of(
            "throughput_samples_per_s", [global_batch_size / t for t in step_times]
        ),
    }
    notes: list[str] = []
    if cpu.readable:
        metrics["cpu_time_s"] = MetricResult.of("cpu_time_s", [r[cpu_at] for r in rows])
    elif cpu.missing:
        notes.append(cpu.missing)
    if flops.counted:
        metrics["flops_per_step"] = MetricResult.of("flops_per_step", [r[flops_at] for r in rows])
    else:
        notes.append(flops.missing_note())
    unseen = unseen_communication(strategy) if sync.world_size > 1 else None
    if unseen is None:
        metrics["comm_busy_fraction"] = MetricResult.of("comm_busy_fraction", [r[2] for r in rows])
        metrics["comm_bytes_per_step"] = MetricResult.of("comm_bytes_per_step", [r[3] for r in rows])
        metrics["collective_calls_per_step"] = MetricResult.of("collective_calls_per_step", [r[4] for r in rows])
        for i, kind in enumerate(KINDS):
            if any(r[5 + i] for r in rows):  # a kind is a figure where a step calls it
                metrics[calls_metric(kind)] = MetricResult.of(calls_metric(kind), [r[5 + i] for r in rows])
    else:
        notes.append(unseen)
    # ranks compared on their median counters (the same names on every rank): calls and bytes where seen, FLOPs
    # where counted
    kept = counted[plan.warmup:] or counted
    local = {name: median([c[name] for c in kept]) for name in kept[0]
             if (name == FLOPS and flops.counted) or (name != FLOPS and unseen is None)}
    if local:
        agreement = agree(local, sync)
        for name in (agreement.differing - {FLOPS}) & metrics.keys():  # ranks counted differently: the mean
            metrics[name] = MetricResult.of(name, [agreement.values[name]] * len(rows))
        if agreement.note is not None:
            notes.append(agreement.note)
    of_medians: float | None = None
    if twin_step is not None:
        pairs = list(zip(step_times, twin_times, strict=True))
        metrics["exposed_comm_fraction"] = MetricResult.of(
            "exposed_comm_fraction", [1.0 - tw / st for st, tw in pairs]
        )
        metrics["compute_comm_ratio"] = MetricResult.of(
            "compute_comm_ratio", [tw / (st - tw) if st > tw else float("inf") for st, tw in pairs]
        )
        of_medians = 1.0 - median(twin_times) / median(step_times)
    return TrainingResult(
        metrics=metrics,
        losses=losses,
        exposed_comm_fraction_of_medians=of_medians,
        twin_time_s=twin_times if twin_step is not None else [],
        notes=notes,
    )
