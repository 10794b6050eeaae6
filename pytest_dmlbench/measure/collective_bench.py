"""Collective benchmarks in the manner of nccl-tests: time per operation, algbw and busbw.

For a collective of size S (see :mod:`pytest_dmlbench.measure.bandwidth` for what S is per collective):
the result is checked once in an untimed call with rank-dependent data, then ``warmup`` calls are made and
the ranks synchronised; each round starts at a barrier and times ``iters`` back-to-back calls on the host
clock, divided by ``iters``; the round's time is the max over ranks (nccl-tests averages over ranks; the
max is the conservative choice and matches every other figure of this package). Beside it each round reads
the CPU time the ranks' processes spent per call, summed over ranks (``cpu_time_s``): the backend's threads do
a collective's work (gloo's copy, reduction and socket calls), so the whole process is read; waiting for a
peer does not count. On CUDA ranks it is the host's launch and synchronisation work, not NCCL's kernels.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from pytest_dmlbench.errors import CollectiveCheckFailed
from pytest_dmlbench.measure.bandwidth import algbw_gbps, busbw_gbps
from pytest_dmlbench.measure.clock import now
from pytest_dmlbench.measure.cpu_time import CpuReader
from pytest_dmlbench.measure.rounds import RankSync, RoundPlan, run_rounds
from pytest_dmlbench.results import MetricResult

BENCH_COLLECTIVES = ("all_reduce", "all_gather", "reduce_scatter", "broadcast", "reduce", "all_to_all")


@dataclass
class _Buffers:
    send: Any
    recv: Any
    nbytes: int


def torch_collective(op: str) -> Callable[..., Any]:
    """The ``torch.distributed`` function implementing ``op`` on whole tensors (newest name first)."""
    import torch.distributed as dist

    names = {
        "all_reduce": ("all_reduce",),
        "all_gather": ("all_gather_single", "all_gather_into_tensor"),
        "reduce_scatter": ("reduce_scatter_single", "reduce_scatter_tensor"),
        "broadcast": ("broadcast",),
        "reduce": ("reduce",),
        "all_to_all": ("all_to_all_single",),
    }[op]
    for name in names:
        fn: Callable[..., Any] | None = getattr(dist, name, None)
        if fn is not None:
            return fn
    raise RuntimeError(f"this torch has none of {names} for {op!r}")


def _call(op: str, fn: Callable[..., Any], buffers: _Buffers, group: Any) -> None:
    if op == "all_reduce":
        fn(buffers.send, group=group)
    elif op == "broadcast":
        fn(buffers.send, src=_global_rank(0, group), group=group)
    elif op == "reduce":
        fn(buffers.send, dst=_global_rank(0, group), group=group)
    else:  # all_gather, reduce_scatter, all_to_all: (output, input)
        fn(buffers.recv, buffers.send, group=group)


def _global_rank(group_rank: int, group: Any) -> int:
    import torch.distributed as dist

    return group_rank if group is None else dist.get_global_rank(group, group_rank)


def _buffers(op: str, nbytes: int, n: int, dtype: Any, device: Any) -> _Buffers:
    """Zero-filled send/receive tensors for size S = ``nbytes`` (rounded down to whole elements per rank)."""
    import torch

    item = torch.empty((), dtype=dtype).element_size()
    if op in ("all_gather", "reduce_scatter", "all_to_all"):
        per_rank = nbytes // (item * n)
        if per_rank < 1:
            raise ValueError(f"{op} of {nbytes} bytes over {n} ranks is less than one element per rank")
        total = per_rank * n
        send_count, recv_count = {
            "all_gather": (per_rank, total),
            "reduce_scatter": (total, per_rank),
            "all_to_all": (total, total),
        }[op]
        send = torch.zeros(send_count, dtype=dtype, device=device)
        recv = torch.zeros(recv_count, dtype=dtype, device=device)
        return _Buffers(send, recv, total * item)
    count = nbytes // item
    if count < 1:
        raise ValueError(f"{op} of {nbytes} bytes is less than one {dtype} element")
    return _Buffers(torch.zeros(count, dtype=dtype, device=device), None, count * item)


def check_collective(
    op: str,
    nbytes: int = 4096,
    *,
    impl: Callable[..., Any] | None = None,
    dtype: Any = None,
    device: Any = None,
    group: Any = None,
) -> None:
    """Run ``op`` once on rank-dependent data and raise :class:`CollectiveCheckFailed` on a wrong result.

    ``impl`` is the function under test, called like its ``torch.distributed`` counterpart (default: that
    counterpart). Every rank must call this; every rank checks its own output.
    """
    import torch
    import torch.distributed as dist

    if op not in BENCH_COLLECTIVES:
        raise ValueError(f"unknown collective {op!r}; known: {', '.join(BENCH_COLLECTIVES)}")
    dtype = dtype if dtype is not None else torch.float32
    n, rank = dist.get_world_size(group), dist.get_rank(group)
    b = _buffers(op, nbytes, n, dtype, device)
    c = b.send.numel() // n if op in ("reduce_scatter", "all_to_all") else b.send.numel()
    tri = n * (n + 1) / 2
    expected: torch.Tensor | None
    if op == "reduce_scatter":  # chunk j of rank r holds (r + 1) * (j + 1)
        b.send.copy_(torch.arange(1, n + 1, dtype=dtype, device=device).repeat_interleave(c) * (rank + 1))
        expected = torch.full_like(b.recv, tri * (rank + 1))
    elif op == "all_to_all":  # chunk j of rank r holds r * n + j; rank r receives j * n + r from rank j
        b.send.copy_((torch.arange(n, dtype=dtype, device=device) + rank * n).repeat_interleave(c))
        expected = (torch.arange(n, dtype=dtype, device=device) * n + rank).repeat_interleave(c)
    else:
        b.send.fill_(rank + 1)
        expected = {
            "all_reduce": torch.full_like(b.send, tri),
            "broadcast": torch.full_like(b.send, 1),
            "reduce": torch.full_like(b.send, tri) if rank == 0 else None,
            "all_gather": torch.arange(1, n + 1, dtype=dtype, device=device).repeat_interleave(c),
        }[op]
    _call(op, impl if impl is not None else torch_collective(op), b, group)
    got = b.recv if op in ("all_gather", "reduce_scatter", "all_to_all") else b.send
    if expected is not None and not torch.equal(got, expected):
        wrong = int((got != expected).sum())
        raise CollectiveCheckFailed(
            f"{op} on rank {rank} of {n}: {wrong} of {got.numel()} elements wrong "
            f"(first got {got.flatten()[:4].tolist()}, expected {expected.flatten()[:4].tolist()})"
        )


@dataclass
class CollectiveResult:
    """Per-round figures of one collective at one size (identical on every rank); ``cpu_time_s`` is empty, and
    ``notes`` say why, where the platform cannot read CPU time."""

    op: str
    nbytes: int
    world_size: int
    iters: int
    time_s: list[float]
    algbw_gbps: list[float]
    busbw_gbps: list[float]
    cpu_time_s: list[float] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def metrics(self) -> dict[str, MetricResult]:
        metrics = {
            "step_time_s": MetricResult.of("step_time_s", self.time_s),
            "algbw_gbps": MetricResult.of("algbw_gbps", self.algbw_gbps),
            "busbw_gbps": MetricResult.of("busbw_gbps", self.busbw_gbps),
        }
        if self.cpu_time_s:
            metrics["cpu_time_s"] = MetricResult.of("cpu_time_s", self.cpu_time_s)
        return metrics


def bench_collective(
    op: str,
    nbytes: int,
    *,
    iters: int = 20,
    warmup: int = 5,
    rounds: int = 5,
    dtype: Any = None,
    device: Any = None,
    group: Any = None,
    check: bool = True,
) -> CollectiveResult:
    """Time ``op`` on a size-S = ``nbytes`` buffer: ``rounds`` samples of ``iters`` back-to-back calls.

    ``op`` is one of :data:`BENCH_COLLECTIVES`. ``nbytes`` is rounded down to whole elements per rank;
    the result's ``nbytes`` is the size actually used. Every rank must call this with the same arguments.
    """
    import torch

    if op not in BENCH_COLLECTIVES:
        raise ValueError(f"unknown collective {op!r}; known: {', '.join(BENCH_COLLECTIVES)}")
    if iters < 1 or warmup < 0 or rounds < 1:
        raise ValueError(f"need iters >= 1, warmup >= 0, rounds >= 1; got {iters}, {warmup}, {rounds}")
    dtype = dtype if dtype is not None else torch.float32
    sync = RankSync(group)
    if check:
        check_collective(op, nbytes, dtype=dtype, device=device, group=group)
    fn = torch_collective(op)
    buffers = _buffers(op, nbytes, sync.world_size, dtype, device)
    on_cuda = buffers.send.device.type == "cuda"
    for _ in range(warmup):
        _call(op, fn, buffers, group)
    if on_cuda:
        torch.cuda.synchronize(buffers.send.device)

    cpu = CpuReader.for_collectives()

    def body() -> tuple[float, float]:
        start, cpu_start = now(), cpu.read()
        for _ in range(iters):
            _call(op, fn, buffers, group)
        if on_cuda:
            torch.cuda.synchronize(buffers.send.device)
        return (now() - start) / iters, (cpu.read() - cpu_start) / iters

    rows = run_rounds(body, RoundPlan(warmup=0, rounds=rounds), width=2, sync=sync, summed=1)
    times = [row[0] for row in rows]
    return CollectiveResult(
        op=op,
        nbytes=buffers.nbytes,
        world_size=sync.world_size,
        iters=iters,
        time_s=times,
        algbw_gbps=[algbw_gbps(buffers.nbytes, t) for t in times],
        busbw_gbps=[busbw_gbps(op, buffers.nbytes, t, sync.world_size) for t in times],
        cpu_time_s=[row[1] for row in rows] if cpu.readable else [],
        notes=[cpu.missing] if cpu.missing else [],
    )
