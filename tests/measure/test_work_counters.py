"""Exact work counters of a training step: FLOPs from torch's flop counter, collective calls from the counter."""

from __future__ import annotations

from typing import Any

import torch

from pytest_dmlbench.measure.rounds import RoundPlan
from pytest_dmlbench.measure.runner import benchmark_training


def _linear_step(width: int) -> Any:
    model = torch.nn.Linear(width, 4)

    def step(inputs: Any, targets: Any, loss_fn: Any) -> float:
        loss = model(torch.ones(2, width)).sum()
        loss.backward()
        return float(loss.detach())

    return step


def test_flops_per_step_are_counted_exactly_and_grow_with_the_counted_work() -> None:
    plan = RoundPlan(warmup=1, rounds=3)
    small = benchmark_training(_linear_step(8), [(0, 0)], global_batch_size=2, loss_fn=None, plan=plan)
    large = benchmark_training(_linear_step(16), [(0, 0)], global_batch_size=2, loss_fn=None, plan=plan)
    # forward 2*2*8*4 = 128, backward as much again (the weight's gradient; the input needs none): 256 FLOPs at
    # width 8, 512 at 16
    assert small.metrics["flops_per_step"].samples == [256.0] * 3
    assert large.metrics["flops_per_step"].samples == [512.0] * 3
    again = benchmark_training(_linear_step(8), [(0, 0)], global_batch_size=2, loss_fn=None, plan=plan)
    assert again.metrics["flops_per_step"].samples == small.metrics["flops_per_step"].samples  # equal across runs


def test_without_a_warm_up_round_flops_are_not_counted_and_a_note_says_why() -> None:
    result = benchmark_training(_linear_step(8), [(0, 0)], global_batch_size=2, loss_fn=None,
                                plan=RoundPlan(warmup=0, rounds=2))
    assert "flops_per_step" not in result.metrics
    assert any("warm-up round" in note for note in result.notes)


def test_a_step_without_collectives_counts_none() -> None:
    result = benchmark_training(_linear_step(8), [(0, 0)], global_batch_size=2, loss_fn=None,
                                plan=RoundPlan(warmup=1, rounds=2))
    assert result.metrics["collective_calls_per_step"].samples == [0.0, 0.0]
