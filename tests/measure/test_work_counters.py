"""Exact work counters of a training step and of a timed callable: FLOPs from torch's flop counter, collective
calls (in total and by kind) from the counter, agreed across ranks; a callable's counted in an untimed round."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import torch
from torch.nn.functional import mse_loss  # the steps here ignore their loss function

from pytest_dmlbench.measure.rounds import RoundPlan
from pytest_dmlbench.measure.runner import benchmark_training, time_callable
from pytest_dmlbench.measure.work_counts import Agreement, agree


def _linear_step(width: int) -> Any:
    model = torch.nn.Linear(width, 4)

    def step(inputs: Any, targets: Any, loss_fn: Any) -> float:
        loss = model(torch.ones(2, width)).sum()
        loss.backward()
        return float(loss.detach())

    return step


def test_flops_per_step_are_counted_exactly_and_grow_with_the_counted_work() -> None:
    plan = RoundPlan(warmup=1, rounds=3)
    small = benchmark_training(_linear_step(8), [(0, 0)], global_batch_size=2, loss_fn=mse_loss, plan=plan)
    large = benchmark_training(_linear_step(16), [(0, 0)], global_batch_size=2, loss_fn=mse_loss, plan=plan)
    # forward 2*2*8*4 = 128, backward as much again (the weight's gradient; the input needs none): 256 FLOPs at
    # width 8, 512 at 16
    assert small.metrics["flops_per_step"].samples == [256.0] * 3
    assert large.metrics["flops_per_step"].samples == [512.0] * 3
    again = benchmark_training(_linear_step(8), [(0, 0)], global_batch_size=2, loss_fn=mse_loss, plan=plan)
    assert again.metrics["flops_per_step"].samples == small.metrics["flops_per_step"].samples  # equal across runs


def test_without_a_warm_up_round_flops_are_not_counted_and_a_note_says_why() -> None:
    result = benchmark_training(_linear_step(8), [(0, 0)], global_batch_size=2, loss_fn=mse_loss,
                                plan=RoundPlan(warmup=0, rounds=2))
    assert "flops_per_step" not in result.metrics
    assert any("warm-up round" in note for note in result.notes)


def test_a_step_without_collectives_counts_none() -> None:
    result = benchmark_training(_linear_step(8), [(0, 0)], global_batch_size=2, loss_fn=mse_loss,
                                plan=RoundPlan(warmup=1, rounds=2))
    assert result.metrics["collective_calls_per_step"].samples == [0.0, 0.0]


def _collective_step(all_reduces: int) -> Any:
    import torch.distributed as dist

    def step(inputs: Any, targets: Any, loss_fn: Any) -> float:
        for _ in range(all_reduces):
            dist.all_reduce(torch.ones(4))
        dist.broadcast(torch.ones(4), src=0)
        return 0.0

    return step


def test_calls_are_counted_by_kind_and_an_added_all_reduce_shows_in_its_kind(world1: None) -> None:
    plan = RoundPlan(warmup=1, rounds=3)
    one = benchmark_training(_collective_step(1), [(0, 0)], global_batch_size=1, loss_fn=mse_loss, plan=plan)
    two = benchmark_training(_collective_step(2), [(0, 0)], global_batch_size=1, loss_fn=mse_loss, plan=plan)
    assert one.metrics["collective_calls_per_step.all_reduce"].samples == [1.0] * 3
    assert two.metrics["collective_calls_per_step.all_reduce"].samples == [2.0] * 3
    # negative control: the kind that did not change reads the same, and kinds never called are no figures
    assert one.metrics["collective_calls_per_step.broadcast"].samples == [1.0] * 3
    assert two.metrics["collective_calls_per_step.broadcast"].samples == [1.0] * 3
    assert {n for n in two.metrics if n.startswith("collective_calls_per_step.")} == {
        "collective_calls_per_step.all_reduce", "collective_calls_per_step.broadcast"}
    assert not any("differ between ranks" in note for note in two.notes)


class _ThreadRank:
    """One rank of a world of threads: the exchanges of :class:`RankSync` over a barrier, for several ranks in
    one process (the agreement's logic, without starting processes)."""

    def __init__(self, rank: int, slots: list[list[float]], barrier: threading.Barrier) -> None:
        self.rank, self.slots, self.barrier = rank, slots, barrier
        self.world_size = len(slots)

    def _all(self, values: Sequence[float]) -> list[list[float]]:
        self.slots[self.rank] = list(values)
        self.barrier.wait()
        everyone = [list(s) for s in self.slots]
        self.barrier.wait()
        return everyone

    def max(self, values: Sequence[float]) -> list[float]:
        return [max(column) for column in zip(*self._all(values), strict=True)]

    def each(self, values: Sequence[float]) -> list[list[float]]:
        return self._all(values)


def _agreed(counters: list[dict[str, float]]) -> list[Agreement]:
    barrier = threading.Barrier(len(counters), timeout=60)  # a guard against a hang, not a time limit
    slots: list[list[float]] = [[] for _ in counters]
    with ThreadPoolExecutor(len(counters)) as pool:
        return list(pool.map(lambda r: agree(counters[r], _ThreadRank(r, slots, barrier)), range(len(counters))))


def test_counters_equal_across_ranks_agree_without_a_note_and_flops_are_summed() -> None:
    same = {"collective_calls_per_step": 2.0, "collective_calls_per_step.all_reduce": 2.0, "flops_per_step": 100.0}
    for agreement in _agreed([same] * 4):
        assert agreement.note is None and not agreement.differing
        assert agreement.values == {"collective_calls_per_step": 2.0, "collective_calls_per_step.all_reduce": 2.0,
                                    "flops_per_step": 400.0}


def test_counters_unequal_across_ranks_are_reported_naming_the_ranks() -> None:
    counters = [{"collective_calls_per_step.recv": 3.0 if rank == 0 else 1.0, "flops_per_step": 10.0 * (rank + 1)}
                for rank in range(4)]
    results = _agreed(counters)
    assert all(result == results[0] for result in results)  # every rank reads the same
    agreement = results[0]
    # the mean (3 + 1 + 1 + 1) / 4; FLOPs the sum
    assert agreement.values == {"collective_calls_per_step.recv": 1.5, "flops_per_step": 100.0}
    assert agreement.differing == {"collective_calls_per_step.recv", "flops_per_step"}
    note = agreement.note
    assert note is not None and "differ between ranks" in note and "the mean over ranks" in note
    assert "collective_calls_per_step.recv: 3 on rank 0, 1 on ranks 1-3" in note
    assert "flops_per_step: 10 on rank 0, 20 on rank 1, 30 on rank 2, 40 on rank 3" in note


def _pipeline_counts(sends: list[int], recvs: list[int]) -> list[dict[str, float]]:
    return [{"collective_calls_per_step": float(s + r), "collective_calls_per_step.send": float(s),
             "collective_calls_per_step.recv": float(r)} for s, r in zip(sends, recvs, strict=True)]


def test_a_call_added_on_ranks_below_the_max_moves_the_agreed_counters() -> None:
    # a 4-stage pipeline: the middle stages send and receive both ways, the end stages one way each; then the last
    # stage sends one more message to the first (its peers' counts, and every max over ranks, stay as they were)
    before = _pipeline_counts(sends=[1, 2, 2, 1], recvs=[1, 2, 2, 1])
    after = _pipeline_counts(sends=[1, 2, 2, 2], recvs=[2, 2, 2, 1])
    for name in before[0]:  # negative control: the max over ranks, the rule this replaced, reads no change
        assert max(rank[name] for rank in before) == max(rank[name] for rank in after)
    was, now = _agreed(before)[0].values, _agreed(after)[0].values
    assert (was["collective_calls_per_step"], now["collective_calls_per_step"]) == (3.0, 3.5)
    assert (was["collective_calls_per_step.send"], now["collective_calls_per_step.send"]) == (1.5, 1.75)
    assert (was["collective_calls_per_step.recv"], now["collective_calls_per_step.recv"]) == (1.5, 1.75)


def test_a_timed_callable_records_its_counters_counted_in_an_untimed_round_only(world1: None) -> None:
    import torch.distributed as dist

    instrumented: list[bool] = []  # per call of the function: whether the collectives were being counted

    def call(all_reduces: int) -> None:
        instrumented.append(hasattr(dist.all_reduce, "__dmlbench_original__"))
        for _ in range(all_reduces):
            dist.all_reduce(torch.ones(4))
        dist.broadcast(torch.ones(4), src=0)
        torch.ones(8, 8) @ torch.ones(8, 8)  # 2 * 8 * 8 * 8 = 1024 FLOPs

    plan = RoundPlan(warmup=2, rounds=3)
    one = time_callable(call, (1,), plan=plan, iterations=2).metrics()
    # the first warm-up round's two calls were counted; the other warm-up round and the 3 timed rounds ran
    # uninstrumented, so counting cost the timed rounds nothing
    assert instrumented == [True] * 2 + [False] * 2 * 4
    two = time_callable(call, (2,), plan=plan).metrics()
    assert {name: m.samples for name, m in one.items() if name != "step_time_s" and name != "cpu_time_s"} == {
        "collective_calls_per_step": [2.0], "collective_calls_per_step.all_reduce": [1.0],
        "collective_calls_per_step.broadcast": [1.0], "comm_bytes_per_step": [0.0], "flops_per_step": [1024.0]}
    assert two["collective_calls_per_step.all_reduce"].samples == [2.0]  # the added all_reduce, by its kind
    assert two["collective_calls_per_step.broadcast"].samples == [1.0]  # negative control: unchanged kind
    assert len(one["step_time_s"].samples) == 3


def test_without_a_warm_up_round_a_timed_callable_counts_nothing_and_says_why() -> None:
    timed = time_callable(lambda: None, plan=RoundPlan(warmup=0, rounds=2))
    assert "collective_calls_per_step" not in timed.metrics()
    assert any("first warm-up round" in note for note in timed.notes)
