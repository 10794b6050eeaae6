"""The ``dmlbench`` fixture's value on a rank: timing, training and collective benchmarks.

Every method must be called by every rank with the same arguments (round counts are agreed through
collectives). Figures recorded here are :class:`~pytest_dmlbench.results.MetricResult` objects from the
start and travel to the parent in that form with the case's outcome; rank-agreed figures are identical on
all ranks. This rank's peak memory over the whole case is measured here (the one producer of
``peak_rss_mb`` and ``peak_cuda_mb``) and maxed over ranks by the parent.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, TypeVar

from pytest_dmlbench.measure.dist_info import DistInfo
from pytest_dmlbench.measure.memory import PeakMemory, PeakMemoryWatch
from pytest_dmlbench.measure.rounds import BlockBudget
from pytest_dmlbench.results import Better, MetricResult

if TYPE_CHECKING:  # imported where used: a rank that never times anything does not load them
    from pytest_dmlbench.measure.collective_bench import CollectiveResult
    from pytest_dmlbench.measure.rounds import RoundPlan
    from pytest_dmlbench.measure.runner import StepFn, Steppable, TrainingResult

Result = TypeVar("Result")

DEFAULT_ROUNDS = 30  # the fewest rounds of a default measurement
DEFAULT_MIN_TIME_S = 1.0  # a default measurement runs until this much measured time (several blocks' worth)
DEFAULT_MAX_ROUNDS = 2000
DEFAULT_WARMUP = 2
MAX_SCRIPT_STEPS = 2000  # a script's iterations kept after its warm-up (the exchange of them is one vector)
COLLECTIVE_BLOCK_MIN_ROUNDS = 5  # a collective's block: enough rounds for a median


class RankBench:
    """``dmlbench(fn, *args, **kwargs)`` like pytest-benchmark's ``benchmark``, plus richer forms."""

    def __init__(self, dist: DistInfo, block: BlockBudget | None = None) -> None:
        self.dist = dist
        self.block = block  # one block of the paired gate: its round budget replaces the case's own
        self.metrics: dict[str, MetricResult] = {}
        self.notes: list[str] = []
        self._memory: PeakMemoryWatch | None = None
        self.peak_memory: PeakMemory | None = None

    # -- case lifecycle (called by the harness) --
    def begin_case(self, *, measure_memory: bool) -> None:
        """Reset this rank's memory peaks (only for cases that use the fixture)."""
        if measure_memory:
            self._memory = PeakMemoryWatch(self.dist.device).start()

    def end_case(self) -> None:
        """Read this rank's peaks; kept only for cases that recorded figures."""
        if self._memory is not None and self.metrics:
            self.peak_memory = self._memory.stop()

    # -- what cases call --
    def _plan(self, rounds: int | None, warmup: int | None, min_time_s: float | None,
              grouped: bool = True) -> RoundPlan:
        from pytest_dmlbench.measure.rounds import RoundPlan

        if self.block is not None:  # a block of the paired gate: its round budget replaces the case's own
            return self.block.plan() if grouped else self.block.one_call_per_round()
        if min_time_s is not None:
            return RoundPlan(warmup=DEFAULT_WARMUP if warmup is None else warmup, rounds=None,
                             min_time_s=min_time_s)
        if rounds is None:  # adaptive: at least DEFAULT_ROUNDS, then until DEFAULT_MIN_TIME_S of measured time
            return RoundPlan(warmup=DEFAULT_WARMUP if warmup is None else warmup, rounds=None,
                             min_time_s=DEFAULT_MIN_TIME_S, min_rounds=DEFAULT_ROUNDS, max_rounds=DEFAULT_MAX_ROUNDS)
        return RoundPlan(warmup=DEFAULT_WARMUP if warmup is None else warmup, rounds=rounds)

    def __call__(self, fn: Callable[..., Result], *args: Any, **kwargs: Any) -> Result:
        """Time ``fn(*args, **kwargs)`` in rank-agreed rounds; returns its last result."""
        return self.pedantic(fn, args=args, kwargs=kwargs)

    def pedantic(self, fn: Callable[..., Result], args: tuple[Any, ...] = (), kwargs: dict[str, Any] | None = None,
                 *, rounds: int | None = None, warmup: int | None = None, iterations: int = 1,
                 min_time_s: float | None = None, samples_per_call: int | None = None) -> Result:
        """Like ``__call__`` with explicit control: fixed ``rounds`` (or adaptive until ``min_time_s``),
        ``warmup`` rounds, ``iterations`` calls per round; ``samples_per_call`` (global samples one call
        processes) adds ``throughput_samples_per_s``. The first warm-up round is counted, not timed: one call's
        collective calls (in total and by kind), bytes and FLOPs (none recorded with ``warmup=0``)."""
        from pytest_dmlbench.measure.runner import time_callable

        if self.block is not None:  # a paired block may time several calls per round to keep rounds >= ~10 ms
            iterations = max(iterations, self.block.iterations)
        timed = time_callable(fn, args, kwargs, plan=self._plan(rounds, warmup, min_time_s),
                              iterations=iterations, device=self.dist.device)
        self.metrics.update(timed.metrics())
        self.notes.extend(n for n in timed.notes if n not in self.notes)
        if samples_per_call is not None:
            self.metrics["throughput_samples_per_s"] = MetricResult.of(
                "throughput_samples_per_s", [samples_per_call / t if t > 0 else float("nan") for t in timed.samples]
            )
        result: Result = timed.result  # fn's last result, as fn returned it
        return result

    def train(self, strategy: Steppable | StepFn, batches: Iterable[tuple[Any, Any]], *, global_batch_size: int,
              loss_fn: Callable[..., Any], twin: Steppable | StepFn | None = None, rounds: int | None = None,
              warmup: int | None = None) -> TrainingResult:
        """Benchmark training steps of a strategy on this rank's ``batches`` against its no-communication
        ``twin``: step time, throughput, exposed communication, busy fraction, bytes, peak memory."""
        from pytest_dmlbench.measure.runner import benchmark_training

        result = benchmark_training(strategy, batches, global_batch_size=global_batch_size, loss_fn=loss_fn,
                                    twin=twin, plan=self._plan(rounds, warmup, None, grouped=False),
                                    device=self.dist.device)
        self.metrics.update(result.metrics)
        self.notes.extend(result.notes)
        return result

    def collective(self, op: str, nbytes: int, *, iters: int = 20, warmup: int = 5, rounds: int = 10,
                   check: bool = True) -> CollectiveResult:
        """nccl-tests style: time ``iters`` back-to-back ``op`` calls per round; records time per op,
        ``algbw_gbps``, ``busbw_gbps`` and ``cpu_time_s`` (the ranks' whole processes per op, summed over ranks);
        correctness is checked in separate untimed calls. In a block of the paired gate the block's budget of calls
        (sized from the time of one op) replaces ``rounds``, grouped ``iters`` to a round, and its warm-up replaces
        ``warmup``; a smoke run times one call, unwarmed."""
        from pytest_dmlbench.measure.collective_bench import bench_collective

        if self.block is not None and self.block.smoke:  # the smoke run: one round of one call, no warm-up
            rounds, iters, warmup = 1, 1, 0
        elif self.block is not None:  # the block's measured calls, at ``iters`` calls a round, at least 5 rounds
            rounds = max(COLLECTIVE_BLOCK_MIN_ROUNDS, math.ceil(self.block.rounds * self.block.iterations / iters))
            warmup = self.block.warmup
        result = bench_collective(op, nbytes, iters=iters, warmup=warmup, rounds=rounds,
                                  device=self.dist.device, check=check)
        self.metrics.update(result.metrics())
        self.notes.extend(note for note in result.notes if note not in self.notes)
        return result

    @contextmanager
    def training_steps(self, *, samples_per_step: int | None = None, warmup: int = DEFAULT_WARMUP) -> Iterator[None]:
        """Time each training iteration the block runs, in code the case did not change (``run_script(...)``, a
        ``Trainer(...).train()``): from the first forward with gradients to the optimizer step
        (:mod:`~pytest_dmlbench.measure.script_steps`), so start-up, data loading and evaluation are left out.
        Records ``step_time_s`` (max over ranks), ``cpu_time_s`` (summed over ranks) and, with
        ``samples_per_step`` (global samples a step trains on), ``throughput_samples_per_s``; the first ``warmup``
        iterations are not kept. Every rank must run the block."""
        from pytest_dmlbench.measure.rounds import RankSync
        from pytest_dmlbench.measure.script_steps import StepClock

        clock = StepClock()
        with clock.watching():
            yield
        sync = RankSync()
        steps = -int(sync.max([-float(len(clock.wall))])[0])  # iterations every rank made
        kept = slice(max(0, warmup), min(steps, max(0, warmup) + MAX_SCRIPT_STEPS))
        if kept.start >= kept.stop:
            self.notes.append(f"the timed block made {steps} training step(s) on every rank, no more than its "
                              f"{warmup} warm-up step(s): no step time recorded (lower warmup=, or run more steps)")
            return
        wall = sync.max(clock.wall[kept])
        self.metrics["step_time_s"] = MetricResult.of("step_time_s", wall)
        if clock.cpu_reader.readable:
            self.metrics["cpu_time_s"] = MetricResult.of("cpu_time_s", sync.sum(clock.cpu[kept]))
        if samples_per_step is not None:
            self.metrics["throughput_samples_per_s"] = MetricResult.of(
                "throughput_samples_per_s", [samples_per_step / t if t > 0 else float("nan") for t in wall])

    def record(self, name: str, samples: Iterable[float] | float, *, unit: str | None = None,
               better: Better = None) -> MetricResult:
        """Record a figure of your own (rank 0's values are the ones kept: make them rank-agreed)."""
        metric = MetricResult.recorded(name, samples, unit, better)
        self.metrics[name] = metric
        return metric
