"""Validation of the measurement library against ground truth, on real gloo process groups.

Each ``check_*`` function runs on every rank of an initialised process group and returns the figures it
measured (identical on every rank); the ``test_*`` cases run them under the harness and assert the
measurement targets listed in the README. Run with::

    pytest --dmlbench --world-size 2 bench_cases/test_measurement_validation.py
"""

from __future__ import annotations

import functools
import mmap
import time
from collections.abc import Callable
from typing import Any

import pytest
import torch
import torch.distributed as tdist
from torch import nn
from torch.distributed.algorithms.ddp_comm_hooks.default_hooks import allreduce_hook
from torch.nn.parallel import DistributedDataParallel

from pytest_dmlbench.errors import CollectiveCheckFailed, NotJudged
from pytest_dmlbench.measure.bandwidth import busbw_gbps
from pytest_dmlbench.measure.clock import now
from pytest_dmlbench.measure.collective_bench import (
    BENCH_COLLECTIVES,
    bench_collective,
    check_collective,
)
from pytest_dmlbench.measure.comm import counting_comm_hook
from pytest_dmlbench.measure.contention import ContentionWatch
from pytest_dmlbench.measure.memory import PeakMemoryWatch, peak_rss_bytes
from pytest_dmlbench.measure.rounds import RankSync, RoundPlan, is_smoke
from pytest_dmlbench.measure.runner import benchmark_training, time_callable
from pytest_dmlbench.results.stats import median_interval, summarize

# The correctness suite CI runs: pytest --dmlbench --world-size 2 -m correctness
pytestmark = pytest.mark.correctness

MB = 1e6
EXPOSED_TOLERANCE_PP = 3.0  # the README's target: exposed fraction within 3 pp of an injected delay's share
BUSBW_RATIO_BAND = (0.9, 1.1)  # the README's target: harness busbw within 10 % of a plain timing loop
ROUNDS_UNTIL_DECIDED = (60, 240)
PAIRS_UNTIL_DECIDED = (31, 124)
CONTENDED = 0.25  # share of the machine's CPU time other work took beyond which a miss is not judged


def within(interval: tuple[float, float], low: float, high: float) -> bool | None:
    """True when ``interval`` lies inside ``[low, high]``, False when wholly outside, None when it straddles."""
    lo, hi = interval
    if low <= lo and hi <= high:
        return True
    if hi < low or lo > high:
        return False
    return None


def measure_until_decided(
    measure: Callable[[int], dict[str, float]], lengths: tuple[int, ...], bounds: tuple[str, str],
    target: tuple[float, float], smoke: bool = False,
) -> tuple[dict[str, float], tuple[float, float], bool | None]:
    """Measure at each length in turn (a noisy run measures longer before it gives up) until the figure's
    interval (the ``bounds`` keys of the figures) lies wholly inside or outside ``target``. A smoke run
    (``--dmlbench-smoke``) measures once at length one: the path runs, nothing is decided."""
    for length in (1,) if smoke else lengths:
        figures = measure(length)
        interval = (figures[bounds[0]], figures[bounds[1]])
        verdict = within(interval, *target)
        if verdict is not None:
            break
    return figures, interval, verdict


def settle(verdict: bool | None, target: str, interval: tuple[float, float], figures: dict[str, float],
           watch: ContentionWatch, smoke: bool = False) -> None:
    """Pass, fail, or end the case as not judged, from where the figure's 95 % interval lies (a smoke run,
    ``--dmlbench-smoke``, judges nothing: its one round decides nothing).

    A timing validation compares its figure with a reference measured in the same run, interleaved round by
    round, so noise widens the interval rather than moving it: a pass needs the whole interval inside the
    target, a miss the whole interval outside; in between the run could not tell, and says so
    (``NotJudged``, listed and counted at the end of the run). A miss while other work took more than
    ``CONTENDED`` of the machine's CPU time (``/proc/stat`` over the measurement, less the ranks' own) is
    not judged either: every wake-up then waits for a core, and a known injected delay stops being the
    ground truth. On an otherwise idle machine a miss fails.
    """
    if smoke:
        return
    world_cpu = torch.tensor([watch.own_cpu_s()], dtype=torch.float64)
    tdist.all_reduce(world_cpu)  # the ranks' own CPU time is not other work
    contended = RankSync().max([watch.share(float(world_cpu)) or 0.0])[0]
    figures = {**figures, "cpu_contention": contended}
    where = f"the 95 % interval [{interval[0]:.4g}, {interval[1]:.4g}]"
    if verdict is None:
        raise NotJudged(f"{target}: {where} straddles a bound, too uncertain to tell a pass from a miss; "
                        f"figures: {figures}")
    if not verdict and contended > CONTENDED:
        raise NotJudged(f"{target}: {where} lies outside it, but other work took {100 * contended:.0f} % of "
                        f"the machine's CPU time (more than {100 * CONTENDED:.0f} %); figures: {figures}")
    if not verdict:
        pytest.fail(f"{target} missed: {where} lies outside it; figures: {figures}")


def _mlp(width: int = 256, seed: int = 0) -> nn.Module:
    torch.manual_seed(seed)
    return nn.Sequential(
        nn.Linear(width, width), nn.ReLU(), nn.Linear(width, width), nn.ReLU(), nn.Linear(width, 10)
    )


class _DDPStep:
    """One DDP SGD step with a given communication hook, or DDP's own C++ all-reduce for None."""

    def __init__(self, hook: Any, width: int = 256) -> None:
        self.model = DistributedDataParallel(_mlp(width))
        if hook is not None:
            self.model.register_comm_hook(None, hook)
        self.optimizer = torch.optim.SGD(self.model.parameters(), lr=0.01)

    def step(self, inputs: torch.Tensor, targets: torch.Tensor, loss_fn: Any) -> float:
        self.optimizer.zero_grad(set_to_none=True)
        loss = loss_fn(self.model(inputs), targets)
        loss.backward()
        self.optimizer.step()
        return float(loss.detach())


def _sleeping_hook(inner: Any, seconds: float, slept: list[float]) -> Any:
    """``inner`` plus a known sleep in a future callback of each step's last bucket (the sleeps actually
    taken are appended to ``slept``)."""

    def sleep_then_pass(done: torch.futures.Future[torch.Tensor]) -> torch.Tensor:
        start = now()
        time.sleep(seconds)
        slept.append(now() - start)
        return done.value()

    # DDP compares the hook's signature with its classes, and under ``from __future__ import annotations``
    # these annotations are strings: ``wraps`` gives it ``inner``'s signature, as measure/comm.py does.
    @functools.wraps(inner)
    def sleeping_hook(state: Any, bucket: Any) -> Any:
        future = inner(state, bucket)
        return future.then(sleep_then_pass) if bucket.is_last() else future

    return sleeping_hook


def _batches(n: int = 4, per_rank: int = 64, width: int = 256) -> list[tuple[torch.Tensor, torch.Tensor]]:
    torch.manual_seed(1 + tdist.get_rank())
    return [(torch.randn(per_rank, width), torch.randint(0, 10, (per_rank,))) for _ in range(n)]


def check_exposed_comm(
    inner: Any = allreduce_hook,
    sleep_s: float = 0.02,
    rounds: int = 60,
    width: int = 1024,
    per_rank: int = 128,
) -> dict[str, float]:
    """Exposed fraction of DDP with hook ``inner`` plus a sleep, against DDP with ``inner`` as the twin.

    The twin is the step without the injected delay, so the ground truth is the injected share
    ``sleep / T(step)``, with the sleeps actually taken and T(step) measured in the same paired rounds.
    """
    plan = RoundPlan(warmup=3, rounds=rounds)
    batches = _batches(per_rank=per_rank, width=width)
    sleeps: list[float] = []
    result = benchmark_training(
        _DDPStep(_sleeping_hook(inner, sleep_s, sleeps), width),
        batches,
        global_batch_size=per_rank * tdist.get_world_size(),
        loss_fn=nn.CrossEntropyLoss(),
        twin=_DDPStep(inner, width),
        plan=plan,
    )
    injected = RankSync().max([summarize(sleeps).median])[0]
    t_step = result.metrics["step_time_s"].stats.median
    low, high = RankSync().max(list(median_interval(result.metrics["exposed_comm_fraction"].samples)))
    return {
        "injected_s": injected,
        "step_time_s": t_step,
        "twin_time_s": summarize(result.twin_time_s).median,
        "injected_share": injected / t_step,
        "exposed_comm_fraction": result.metrics["exposed_comm_fraction"].stats.median,
        "exposed_comm_fraction_iqr": result.metrics["exposed_comm_fraction"].stats.iqr,
        "of_medians": result.exposed_comm_fraction_of_medians or float("nan"),
        "error_low_pp": 100 * (low - injected / t_step),
        "error_high_pp": 100 * (high - injected / t_step),
        "rounds": rounds,
    }


def _plain_busbw(nbytes: int, iters: int) -> float:
    """A plain timing loop: barrier, ``iters`` all_reduce calls, time / iters, max over ranks."""
    tensor = torch.zeros(nbytes // 4)
    tdist.all_reduce(tensor)
    tdist.barrier()
    start = time.perf_counter()
    for _ in range(iters):
        tdist.all_reduce(tensor)
    elapsed = torch.tensor([(time.perf_counter() - start) / iters], dtype=torch.float64)
    tdist.all_reduce(elapsed, op=tdist.ReduceOp.MAX)
    return busbw_gbps("all_reduce", nbytes, float(elapsed), tdist.get_world_size())


def check_busbw(nbytes: int = 16 * 1024 * 1024, iters: int = 5, pairs: int = 31) -> dict[str, float]:
    """Harness busbw of all_reduce against a plain loop, alternating round by round in the same run.

    ``ratio`` is the median over pairs of harness / plain (paired, so slow drift of the machine cancels).
    """
    harness: list[float] = []
    plain: list[float] = []
    for pair in range(pairs):
        result = bench_collective("all_reduce", nbytes, iters=iters, warmup=1, rounds=1, check=pair == 0)
        harness += result.busbw_gbps
        plain.append(_plain_busbw(nbytes, iters))
    ratios = [h / p for h, p in zip(harness, plain, strict=True)]  # identical on every rank (max over ranks)
    low, high = median_interval(ratios)
    return {
        "harness_busbw_gbps": summarize(harness).median,
        "plain_busbw_gbps": summarize(plain).median,
        "ratio": summarize(ratios).median,
        "ratio_iqr": summarize(ratios).iqr,
        "ratio_low": low,
        "ratio_high": high,
        "pairs": pairs,
    }


def _touch(nbytes: int) -> mmap.mmap:
    """``nbytes`` resident until closed: an anonymous mapping with every page written, given back to the system
    when closed whatever allocator the process runs (tcmalloc keeps freed heap memory for reuse, so a freed
    tensor's pages would stay resident and a later tensor's would not raise the peak: a night with
    ``--dmlbench-rank-allocator tcmalloc`` read a rise of 0 MB for 80 MB that way)."""
    region = mmap.mmap(-1, nbytes)
    for offset in range(0, nbytes, mmap.PAGESIZE):
        region[offset] = 1
    return region


def check_peak_rss(size_mb: int = 80, earlier_mb: int = 200) -> dict[str, float]:
    """Peak RSS over a case allocating ``size_mb`` against an empty case, after an earlier, larger peak."""
    sync = RankSync()
    _touch(int(earlier_mb * MB)).close()
    stale = peak_rss_bytes() or 0  # without a reset this high-water mark would carry into the next case
    watch = PeakMemoryWatch()
    empty = watch.start().stop()
    watch.start()
    _touch(int(size_mb * MB)).close()
    alloc = watch.stop()
    if not (empty.rss_reset and alloc.rss_reset):
        raise RuntimeError("/proc/self/clear_refs is not writable here: the peak RSS cannot be reset")
    empty_mb, alloc_mb, stale_mb = sync.max([empty.peak_rss_mb or 0.0, alloc.peak_rss_mb or 0.0, stale / MB])
    return {"empty_mb": empty_mb, "alloc_mb": alloc_mb, "stale_mb": stale_mb, "rise_mb": alloc_mb - empty_mb}


class _AllReduceStep:
    """A hand-written data-parallel step: one blocking all_reduce per gradient."""

    def __init__(self) -> None:
        self.model = _mlp()
        self.optimizer = torch.optim.SGD(self.model.parameters(), lr=0.01)

    def step(self, inputs: torch.Tensor, targets: torch.Tensor, loss_fn: Any) -> float:
        self.optimizer.zero_grad(set_to_none=True)
        loss = loss_fn(self.model(inputs), targets)
        loss.backward()
        for p in self.model.parameters():
            assert p.grad is not None
            tdist.all_reduce(p.grad)
            p.grad.div_(tdist.get_world_size())
        self.optimizer.step()
        return float(loss.detach())


def check_comm_bytes() -> dict[str, float]:
    """comm_bytes_per_step of a hand-written all-reduce step and of DDP with the counting hook."""
    plan = RoundPlan(warmup=1, rounds=3)
    loss = nn.CrossEntropyLoss()
    batches = _batches(n=1, per_rank=8)
    gb = 8 * tdist.get_world_size()
    manual = benchmark_training(_AllReduceStep(), batches, global_batch_size=gb, loss_fn=loss, plan=plan)
    ddp = benchmark_training(
        _DDPStep(counting_comm_hook()), batches, global_batch_size=gb, loss_fn=loss, plan=plan
    )
    param_bytes = sum(p.numel() * p.element_size() for p in _mlp().parameters())
    return {
        "param_bytes": float(param_bytes),
        "manual_bytes": max(manual.metrics["comm_bytes_per_step"].samples),
        "manual_bytes_min": min(manual.metrics["comm_bytes_per_step"].samples),
        "ddp_bytes": max(ddp.metrics["comm_bytes_per_step"].samples),
        "ddp_bytes_min": min(ddp.metrics["comm_bytes_per_step"].samples),
        "manual_busy": manual.metrics["comm_busy_fraction"].stats.median,
    }


@pytest.mark.dmlbench(world_size=2)
def test_injected_hook_sleep_moves_exposed_fraction_by_its_share(dist: Any, dmlbench: Any) -> None:
    watch = ContentionWatch.start()
    figures, interval, verdict = measure_until_decided(
        lambda rounds: check_exposed_comm(allreduce_hook, rounds=rounds), ROUNDS_UNTIL_DECIDED,
        ("error_low_pp", "error_high_pp"), (-EXPOSED_TOLERANCE_PP, EXPOSED_TOLERANCE_PP), is_smoke(dmlbench.block))
    assert figures["injected_s"] >= 0.02, figures
    error = figures["exposed_comm_fraction"] - figures["injected_share"]
    dmlbench.record("exposed_minus_injected_pp", 100 * error, unit="pp", better=None)
    dmlbench.record("injected_share", figures["injected_share"], unit="fraction", better=None)
    settle(verdict, f"exposed_comm_fraction minus the injected share within +-{EXPOSED_TOLERANCE_PP:g} pp "
                    f"(measured {100 * error:+.2f} pp)", interval, figures, watch, is_smoke(dmlbench.block))


@pytest.mark.dmlbench(world_size=2)
def test_harness_busbw_matches_a_plain_timing_loop(dist: Any, dmlbench: Any) -> None:
    watch = ContentionWatch.start()
    figures, interval, verdict = measure_until_decided(
        lambda pairs: check_busbw(pairs=pairs), PAIRS_UNTIL_DECIDED, ("ratio_low", "ratio_high"), BUSBW_RATIO_BAND,
        is_smoke(dmlbench.block))
    dmlbench.record("busbw_harness_over_plain", figures["ratio"], unit="ratio", better=None)
    settle(verdict, f"harness/plain busbw ratio within {list(BUSBW_RATIO_BAND)} (measured {figures['ratio']:.3f})",
           interval, figures, watch, is_smoke(dmlbench.block))


@pytest.mark.dmlbench(world_size=2)
def test_peak_rss_rises_by_the_allocated_size_and_is_reset_between_cases(dist: Any, dmlbench: Any) -> None:
    figures = check_peak_rss(size_mb=80, earlier_mb=200)
    dmlbench.record("rss_rise_for_80MB", figures["rise_mb"], unit="MB", better=None)
    assert abs(figures["rise_mb"] - 80) <= 8, figures
    # negative control: the stale high-water mark does hold the earlier 200 MB, the reset peak does not
    assert figures["stale_mb"] - figures["empty_mb"] >= 150, figures


@pytest.mark.dmlbench(world_size=1)
def test_world_size_one_reports_zero_communication_bytes(dist: Any) -> None:
    figures = check_comm_bytes()
    assert figures["manual_bytes"] == 0 and figures["ddp_bytes"] == 0, figures


@pytest.mark.dmlbench(world_size=2)
def test_comm_bytes_per_step_counts_every_gradient_once(dist: Any) -> None:
    # the positive counterpart of the world-size-1 case: the same steps do report their bytes here
    figures = check_comm_bytes()
    assert figures["manual_bytes"] == figures["manual_bytes_min"] == figures["param_bytes"], figures
    assert figures["ddp_bytes"] == figures["ddp_bytes_min"] == figures["param_bytes"], figures


def _does_nothing(*args: Any, **kwargs: Any) -> None:
    return None


def _all_reduce_max(tensor: torch.Tensor, group: Any = None) -> None:
    tdist.all_reduce(tensor, op=tdist.ReduceOp.MAX, group=group)


@pytest.mark.dmlbench(world_size=2)
@pytest.mark.parametrize("op", BENCH_COLLECTIVES, ids=list(BENCH_COLLECTIVES))
def test_collective_check_accepts_torch_and_rejects_a_wrong_implementation(dist: Any, op: str) -> None:
    check_collective(op)
    # negative control: a collective that does nothing leaves wrong data on every rank that receives
    # (broadcast: the non-source rank; reduce: the destination)
    receives = {"broadcast": dist.rank != 0, "reduce": dist.rank == 0}.get(op, True)
    if receives:
        with pytest.raises(CollectiveCheckFailed, match=f"{op} on rank {dist.rank} of 2"):
            check_collective(op, impl=_does_nothing)
    else:
        check_collective(op, impl=_does_nothing)


@pytest.mark.dmlbench(world_size=2)
def test_collective_check_rejects_the_wrong_reduction(dist: Any) -> None:
    with pytest.raises(CollectiveCheckFailed, match="elements wrong"):
        check_collective("all_reduce", impl=_all_reduce_max)


@pytest.mark.dmlbench(world_size=2)
def test_adaptive_round_count_is_decided_by_rank_zero_and_samples_are_maxed(dist: Any) -> None:
    # rank 1 is five times slower: left to itself its rule would stop after 4 rounds, rank 0's after 20
    seconds = 0.001 if dist.rank == 0 else 0.005
    plan = RoundPlan(warmup=1, rounds=None, min_time_s=0.02, min_rounds=3, max_rounds=200)
    timed = time_callable(time.sleep, (seconds,), plan=plan)
    counts = [torch.zeros(1) for _ in range(2)]
    tdist.all_gather(counts, torch.tensor([float(len(timed.samples))]))
    assert counts[0] == counts[1], counts  # every rank ran the same rounds
    assert len(timed.samples) >= 5  # more than rank 1 alone would have run: rank 0 decided
    assert min(timed.samples) >= 0.005  # each sample is the slower rank's time


@pytest.mark.dmlbench(world_size=2)
def test_ddp_traffic_out_of_sight_is_not_reported_as_zero(dist: Any) -> None:
    batches = _batches(n=1, per_rank=8)
    plan = RoundPlan(warmup=1, rounds=2)  # a warm-up round: FLOPs are counted in it, so no note of theirs
    loss = nn.CrossEntropyLoss()
    builtin = benchmark_training(_DDPStep(None), batches, global_batch_size=16, loss_fn=loss, plan=plan)
    assert "comm_bytes_per_step" not in builtin.metrics and "comm_busy_fraction" not in builtin.metrics
    assert "counting_comm_hook" in builtin.notes[0]
    hooked = benchmark_training(
        _DDPStep(counting_comm_hook()), batches, global_batch_size=16, loss_fn=loss, plan=plan
    )
    assert hooked.notes == [] and min(hooked.metrics["comm_bytes_per_step"].samples) > 0
