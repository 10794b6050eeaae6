"""Rank-agreed timing rounds: every rank runs the same number of rounds, each started at a barrier.

One small ``all_reduce(MAX)`` on a float64 vector per round does three jobs at once:

1. it is the barrier the round starts at (no rank leaves it before every rank entered it);
2. it carries rank 0's decision whether another round follows (rank 0 contributes 1.0 or 0.0, the other
   ranks 0.0, so MAX yields rank 0's flag): round counts are agreed, no collective is left unmatched,
   even under an adaptive stopping rule;
3. it carries the values every rank measured in the previous round, so each round's result is the max
   over ranks, identical on all ranks; a value to be summed over ranks (CPU time) travels in a slot per
   rank, so the max hands every rank every rank's value.

A loop of R rounds (warm-up included) issues R + 1 of these. They go to the uninstrumented
``all_reduce``, so collective instrumentation never counts them. Without an initialised process group, or
with a world of one rank, rounds run locally with no collective.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from pytest_dmlbench.measure.comm import original


@dataclass(frozen=True)
class RoundPlan:
    """How many rounds to run. ``rounds`` set: exactly that many. ``rounds=None``: adaptive, decided by
    rank 0 from its own measured times: at least ``min_rounds``, then until the measured time reaches
    ``min_time_s`` or ``max_rounds`` is hit. ``warmup`` rounds run first and are discarded."""

    warmup: int = 1
    rounds: int | None = 10
    min_time_s: float = 1.0
    min_rounds: int = 5
    max_rounds: int = 1000

    def __post_init__(self) -> None:
        if self.warmup < 0:
            raise ValueError(f"RoundPlan: warmup must be >= 0, got {self.warmup}")
        if self.rounds is not None and self.rounds < 1:
            raise ValueError(f"RoundPlan: rounds must be >= 1 (or None for adaptive), got {self.rounds}")
        if self.rounds is None:
            if not 1 <= self.min_rounds <= self.max_rounds:
                raise ValueError(
                    f"RoundPlan: need 1 <= min_rounds <= max_rounds, got {self.min_rounds}, {self.max_rounds}"
                )
            if not (self.min_time_s >= 0 and math.isfinite(self.min_time_s)):
                raise ValueError(f"RoundPlan: min_time_s must be a finite number >= 0, got {self.min_time_s}")

    def wants_more(self, rounds_run: int, measured: Sequence[float]) -> bool:
        """Whether another round follows, after ``rounds_run`` rounds (warm-up included) whose measured
        (post-warm-up) first values are ``measured``."""
        if rounds_run < self.warmup:
            return True
        done = len(measured)
        if self.rounds is not None:
            return done < self.rounds
        if done < self.min_rounds:
            return True
        return done < self.max_rounds and sum(measured) < self.min_time_s


@dataclass(frozen=True)
class BlockBudget:
    """One block of the paired gate: every ``dmlbench`` measurement of the case body runs exactly
    ``rounds`` rounds after ``warmup`` rounds, timing at least ``iterations`` calls per round."""

    rounds: int
    warmup: int
    iterations: int = 1
    whole_experiment: bool = False
    """Experiments train and measure in full, ignoring the budget: in the ordinary (calibration) run, which
    checks their outcome, and beside a REF whose experiments predate budgeted blocks (so both sides match)."""
    profile: bool = False
    """Run the body under the operator profiler (``measure/op_profile.py``): a block that says where its time
    went, for a confirmed regression's explanation; its figures are not judged."""
    smoke: bool = False
    """``--dmlbench-smoke``: the body runs in its smallest form (an experiment one step of the smallest batch,
    a property one example, a case's own loops :func:`smoke_or` rounds); nothing it measures is judged."""

    def plan(self) -> RoundPlan:
        return RoundPlan(warmup=self.warmup, rounds=self.rounds)

    def one_call_per_round(self) -> RoundPlan:
        """The same measured time for a body that runs one step per round (``train``): ``rounds x
        iterations`` rounds."""
        return RoundPlan(warmup=self.warmup, rounds=self.rounds * self.iterations)


CALIBRATION_BUDGET = BlockBudget(rounds=10, warmup=2, whole_experiment=True)
"""The ordinary run of a case under the paired gate: it checks the case and sizes the blocks from its step
time; the verdict's evidence is the block pairs measured after it, so it needs no long measurement."""

SMOKE_BUDGET = BlockBudget(rounds=1, warmup=0, smoke=True)
"""``--dmlbench-smoke``: every measurement of a case runs one round (a collective its few), an experiment one
step, so the whole suite's bodies run quickly and nothing is measured to judge."""


def is_smoke(block: BlockBudget | None) -> bool:
    """Whether ``block`` (a case's ``dmlbench.block`` or ``dmlbench_metrics.block``) is the smoke run's."""
    return block is not None and block.smoke


def smoke_or(block: BlockBudget | None, full: int, smallest: int = 1) -> int:
    """How many times a case's own loop runs: ``full``, or ``smallest`` in a smoke run (``--dmlbench-smoke``).
    For loops the measurement API does not see (repetitions, examples, steps a case counts itself)."""
    return smallest if is_smoke(block) else full

"""The ordinary run of a case under the paired gate: it checks the case and sizes the blocks from its step
time; the verdict's evidence is the block pairs measured after it, so it needs no long measurement."""


class RankSync:
    """The per-round synchronising ``all_reduce(MAX)`` of this rank in ``group`` (default: the world)."""

    def __init__(self, group: Any = None) -> None:
        import torch
        import torch.distributed as dist

        self._torch = torch
        self.group = group
        initialised = dist.is_available() and dist.is_initialized()
        self.world_size = dist.get_world_size(group) if initialised else 1
        self.rank = dist.get_rank(group) if initialised else 0
        self.distributed = self.world_size > 1
        self._all_reduce = original("all_reduce")
        self._max = dist.ReduceOp.MAX
        self._device = torch.device("cpu")
        if self.distributed and dist.get_backend(group) == "nccl":
            self._device = torch.device("cuda", torch.cuda.current_device())

    def exchange(self, flag: float, values: Sequence[float]) -> tuple[bool, list[float]]:
        """Barrier + agreement: (rank 0's flag > 0, element-wise max over ranks of ``values``)."""
        if not self.distributed:
            return flag > 0, [float(v) for v in values]
        mine = flag if self.rank == 0 else 0.0
        vector = self._torch.tensor([mine, *values], dtype=self._torch.float64, device=self._device)
        self._all_reduce(vector, op=self._max, group=self.group)
        out = vector.tolist()
        return out[0] > 0, out[1:]

    def barrier(self) -> None:
        """A barrier through the same uninstrumented collective."""
        self.exchange(0.0, ())

    def max(self, values: Sequence[float]) -> list[float]:
        """Element-wise max over ranks of ``values`` (also a barrier)."""
        return self.exchange(0.0, values)[1]

    def sum(self, values: Sequence[float]) -> list[float]:
        """Element-wise sum over ranks of ``values`` (each rank's in a slot of its own; also a barrier)."""
        return _slot_sums(self.max(_own_slots(values, self)), len(values))

    def each(self, values: Sequence[float]) -> list[list[float]]:
        """Every rank's ``values``, one list per rank in rank order (each rank's in slots of its own; also a
        barrier)."""
        slots = self.max(_own_slots(values, self))
        return [[slots[i * self.world_size + rank] for i in range(len(values))] for rank in range(self.world_size)]


def run_rounds(
    body: Callable[[], Sequence[float]],
    plan: RoundPlan,
    width: int,
    sync: RankSync | None = None,
    summed: int = 0,
) -> list[list[float]]:
    """Run ``body`` in rank-agreed rounds and return, per measured round, the max over ranks of the
    ``width`` values it returned (identical on every rank), except the last ``summed`` of them, which are
    summed over ranks (each rank sends its value in a slot of its own, so the same MAX exchange yields every
    rank's value). The first value drives the adaptive rule."""
    if not 0 <= summed <= width:
        raise ValueError(f"summed must be between 0 and width ({width}), got {summed}")
    sync = sync if sync is not None else RankSync()
    rows: list[list[float]] = []
    measured_local: list[float] = []
    pending = [0.0] * width
    rounds_run = 0
    maxed_width = width - summed
    while True:
        flag = 1.0 if plan.wants_more(rounds_run, measured_local) else 0.0
        go, exchanged = sync.exchange(flag, [*pending[:maxed_width], *_own_slots(pending[maxed_width:], sync)])
        if rounds_run > plan.warmup:
            rows.append([*exchanged[:maxed_width], *_slot_sums(exchanged[maxed_width:], summed)])
        if not go:
            return rows
        pending = [float(v) for v in body()]
        if len(pending) != width:
            raise ValueError(f"round body returned {len(pending)} values, expected {width}")
        rounds_run += 1
        if rounds_run > plan.warmup:
            measured_local.append(pending[0])


def _own_slots(values: Sequence[float], sync: RankSync) -> list[float]:
    """``values`` laid out one block of ``world_size`` slots each, this rank's value in its own slot."""
    slots = [0.0] * (len(values) * sync.world_size)
    for i, value in enumerate(values):
        slots[i * sync.world_size + sync.rank] = value
    return slots


def _slot_sums(slots: Sequence[float], count: int) -> list[float]:
    """The sum of each of ``count`` equal blocks of ``slots``: every rank's value of one summed figure."""
    if count == 0:
        return []
    size = len(slots) // count
    return [math.fsum(slots[i * size:(i + 1) * size]) for i in range(count)]
