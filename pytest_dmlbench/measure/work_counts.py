"""A step's exact work counters: collective calls by kind, bytes and FLOPs, agreed across ranks.

The collective counter (:mod:`.comm`) records calls per operation name; :data:`KINDS` is every name it can
record (the ``torch.distributed`` collectives, the functional ones, DDP's counted buckets) plus ``other`` for
a name another library's backend issues, so every rank sends its counts in one vector of the same width. A
kind is recorded as a figure only where a step calls it (``collective_calls_per_step.all_reduce``); the gates
read a kind a side does not record as zero calls of it (``gates/figures.py``).

Ranks are expected to count alike, and then :func:`agree` records each counter as every rank counts it (FLOPs:
the sum over ranks). Where ranks differ (a parameter server's rank 0 receives what the others send; a pipeline's
stages send and receive unlike counts) it records calls and bytes as the mean over ranks, so that a change on any
rank moves them (the max over ranks hid a call added or dropped on a rank below the max), and says so in a note
naming each rank's count.

``dmlbench(fn)`` counts in its first warm-up round (:class:`WorkCount`): that round runs ``fn`` instrumented and
under torch's flop counter, untimed, and the timed rounds run with neither installed, so counting costs them
nothing.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

from pytest_dmlbench.measure.comm import (
    DDP_BUCKET_OP,
    FUNCTIONAL_PAYLOAD,
    PAYLOAD,
    RECORDED_AS,
    CommCounter,
    instrument_collectives,
)
from pytest_dmlbench.measure.flops import FlopCount
from pytest_dmlbench.results import CALLS_TOTAL, calls_metric

OTHER = "other"
KINDS: tuple[str, ...] = (*sorted({RECORDED_AS.get(op, op) for op in PAYLOAD}
                                  | {op.removesuffix("_autograd") for op in FUNCTIONAL_PAYLOAD} | {DDP_BUCKET_OP}),
                          OTHER)
BYTES = "comm_bytes_per_step"
DIFFER_LEAD = "work counters differ between ranks"
FLOPS = "flops_per_step"


def kind_counts(counter: CommCounter) -> list[float]:
    """The calls ``counter`` recorded, per kind of :data:`KINDS` (a name outside them counts as ``other``)."""
    counts = dict.fromkeys(KINDS, 0.0)
    for op, stats in dict(counter.ops).items():
        counts[op if op in counts else OTHER] += stats.calls
    return [counts[kind] for kind in KINDS]


def step_counters(counter: CommCounter, per: int = 1, flops: float | None = None) -> dict[str, float]:
    """This rank's counters of one step from ``counter`` (which saw ``per`` steps): the calls in total, the bytes,
    the calls of every kind of :data:`KINDS` (zeros included, so every rank's keys are the same) and ``flops``."""
    counts = [calls / per for calls in kind_counts(counter)]
    values = {CALLS_TOTAL: sum(counts), BYTES: counter.bytes / per,
              **{calls_metric(kind): n for kind, n in zip(KINDS, counts, strict=True)}}
    if flops is not None:
        values[FLOPS] = flops
    return values


def called_kinds(values: Mapping[str, float]) -> dict[str, float]:
    """``values`` without the kinds no rank called (a kind is a figure only where a step calls it)."""
    return {name: value for name, value in values.items()
            if value != 0.0 or name in (CALLS_TOTAL, BYTES, FLOPS)}


class Exchange(Protocol):
    """What :func:`agree` needs of :class:`~pytest_dmlbench.measure.rounds.RankSync`."""

    world_size: int

    def max(self, values: Sequence[float]) -> list[float]: ...

    def each(self, values: Sequence[float]) -> list[list[float]]: ...


@dataclass(frozen=True)
class Agreement:
    """Counters agreed over ranks: their values, the names ranks counted differently, and the note naming each
    rank's count of those (None where every rank counted alike)."""

    values: dict[str, float]
    differing: frozenset[str]
    note: str | None


def agree(local: Mapping[str, float], sync: Exchange, summed: Sequence[str] = (FLOPS,)) -> Agreement:
    """Each counter of ``local`` (the same keys, in the same order, on every rank) as every rank counts it, those
    named in ``summed`` as the sum over ranks; where ranks counted differently, the mean over ranks (the sum for
    ``summed``), with a note naming each rank's count."""
    names = list(local)
    mine = [float(local[name]) for name in names]
    both = sync.max([*mine, *(-v for v in mine)])
    high, low = both[:len(names)], [-v for v in both[len(names):]]
    differing = [i for i, (h, lo) in enumerate(zip(high, low, strict=True)) if h != lo]
    per_rank = sync.each([mine[i] for i in differing]) if differing else []
    agreed = {}
    for i, name in enumerate(names):
        if i in differing:
            total = sum(rank[differing.index(i)] for rank in per_rank)
            agreed[name] = total if name in summed else total / sync.world_size
        else:
            agreed[name] = high[i] * sync.world_size if name in summed else high[i]
    if not differing:
        return Agreement(agreed, frozenset(), None)
    parts = [f"{names[i]}: {_by_rank([rank[j] for rank in per_rank])}" for j, i in enumerate(differing)]
    note = (f"{DIFFER_LEAD} (calls and bytes are recorded as the mean over ranks, so that a change on any rank moves "
            "them; FLOPs as the sum): " + "; ".join(parts))
    return Agreement(agreed, frozenset(names[i] for i in differing), note)


def _by_rank(values: Sequence[float]) -> str:
    """``2 on rank 0, 1 on ranks 1-3``: each count with the ranks that read it."""
    groups: dict[float, list[int]] = {}
    for rank, value in enumerate(values):
        groups.setdefault(value, []).append(rank)
    return ", ".join(f"{value:g} on {_ranks(ranks)}" for value, ranks in groups.items())


def _ranks(ranks: Sequence[int]) -> str:
    runs: list[list[int]] = []
    for rank in ranks:
        if runs and rank == runs[-1][-1] + 1:
            runs[-1].append(rank)
        else:
            runs.append([rank])
    text = ", ".join(f"{run[0]}" if len(run) == 1 else f"{run[0]}-{run[-1]}" for run in runs)
    return f"rank{'s' if len(ranks) > 1 else ''} {text}"


class WorkCount:
    """One call's work counters on this rank (calls by kind, bytes, FLOPs), counted once, in the first warm-up
    round of a measurement, so that no timed round runs instrumented (``enabled`` only where there is one)."""

    def __init__(self, enabled: bool) -> None:
        self.enabled = enabled
        self.local: dict[str, float] | None = None

    @property
    def pending(self) -> bool:
        """Whether the next round is the one to count."""
        return self.enabled and self.local is None

    def count(self, run: Callable[[], None], calls: int) -> None:
        """Run ``run`` (``calls`` calls of the measured function) counting its collectives and FLOPs."""
        counter = CommCounter()
        flops = FlopCount(enabled=True)
        with instrument_collectives(counter), flops.counting():
            run()
        self.local = step_counters(counter, calls, flops.value / calls)

    def agreed(self, sync: Exchange) -> Agreement:
        """The counters agreed over ranks, with the note naming each rank's count where ranks differ (every rank
        calls this: it exchanges)."""
        return agree(self.local, sync) if self.local is not None else Agreement({}, frozenset(), None)

    def missing_note(self) -> str | None:
        if self.enabled:
            return None
        return ("collective calls, comm_bytes_per_step and flops_per_step are counted in the first warm-up round, and "
                "this measurement had none (warmup=0): not recorded")
