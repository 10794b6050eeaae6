"""A paired block's round budget on a rank: timed calls are grouped per round, a training body that steps
once per round gets as many rounds as grouped calls, so both measure about the same time."""

from __future__ import annotations

from collections.abc import Callable

import torch

from pytest_dmlbench.measure.bench import RankBench
from pytest_dmlbench.measure.dist_info import DistInfo
from pytest_dmlbench.measure.rounds import CALIBRATION_BUDGET, SMOKE_BUDGET, BlockBudget

BUDGET = BlockBudget(rounds=3, warmup=1, iterations=4)
LOCAL = DistInfo(0, 1, "gloo", "cpu")


def test_grouped_calls_and_training_steps_cover_the_same_number_of_calls() -> None:
    assert BUDGET.plan().rounds == 3
    assert BUDGET.one_call_per_round().rounds == 12 and BUDGET.one_call_per_round().warmup == 1
    assert CALIBRATION_BUDGET.rounds >= 5  # enough rounds to read a step time from


def test_a_block_sets_the_rounds_of_pedantic_and_of_train() -> None:
    calls = 0

    def fn() -> None:
        nonlocal calls
        calls += 1

    bench = RankBench(LOCAL, BUDGET)
    bench.pedantic(fn, rounds=50)  # the case's own round count gives way to the block's
    assert len(bench.metrics["step_time_s"].samples) == 3
    assert calls == (1 + 3) * 4  # warm-up and measured rounds, four calls each

    model = torch.nn.Linear(4, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)

    def step(inputs: torch.Tensor, targets: torch.Tensor, loss_fn: Callable[..., torch.Tensor]) -> float:
        optimizer.zero_grad()
        loss = loss_fn(model(inputs), targets)
        loss.backward()  # type: ignore[no-untyped-call]  # untyped in torch
        optimizer.step()
        return float(loss.detach())

    trained = RankBench(LOCAL, BUDGET)
    trained.train(step, [(torch.randn(2, 4), torch.randn(2, 1))], global_batch_size=2,
                  loss_fn=torch.nn.functional.mse_loss, rounds=50)
    assert len(trained.metrics["step_time_s"].samples) == 12


def test_a_block_sets_the_rounds_of_collective(world1: None) -> None:
    bench = RankBench(LOCAL, BlockBudget(rounds=10, warmup=1, iterations=4))  # 40 calls of one op's time
    bench.collective("all_reduce", 1024, iters=2, warmup=0, rounds=50)  # the case's own rounds give way
    assert {len(m.samples) for m in bench.metrics.values()} == {20}  # 40 calls, 2 to a round
    grouped = RankBench(LOCAL, BlockBudget(rounds=10, warmup=1, iterations=4))
    grouped.collective("all_reduce", 1024, iters=20, warmup=0, rounds=50)
    assert {len(m.samples) for m in grouped.metrics.values()} == {5}  # 40 calls at 20 a round, but 5 at least
    unbudgeted = RankBench(LOCAL)  # negative control: outside a block the case's own count holds
    unbudgeted.collective("all_reduce", 1024, iters=2, warmup=0, rounds=7)
    assert {len(m.samples) for m in unbudgeted.metrics.values()} == {7}
    smoke = RankBench(LOCAL, SMOKE_BUDGET)  # a smoke run: one round of one call (the paired block's 5 do not hold)
    result = smoke.collective("all_reduce", 1024, iters=20, warmup=5, rounds=50)
    assert {len(m.samples) for m in smoke.metrics.values()} == {1} and result.iters == 1


def test_a_case_s_own_loops_shrink_in_a_smoke_run_only() -> None:
    from pytest_dmlbench.measure.rounds import is_smoke, smoke_or

    assert is_smoke(SMOKE_BUDGET) and smoke_or(SMOKE_BUDGET, 200) == 1 and smoke_or(SMOKE_BUDGET, 16, 2) == 2
    # negative control: the ordinary run, a paired block and the calibration run keep the full count
    for block in (None, BUDGET, CALIBRATION_BUDGET):
        assert not is_smoke(block) and smoke_or(block, 200) == 200, block
