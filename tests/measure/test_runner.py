from __future__ import annotations

import math
from typing import Any

import pytest

from pytest_dmlbench.measure.clock import ManualClock, use_clock
from pytest_dmlbench.measure.rounds import RoundPlan
from pytest_dmlbench.measure.runner import benchmark_training, time_callable


def test_time_callable_records_each_round_and_returns_the_result() -> None:
    fake = ManualClock()
    durations = iter([0.5, 0.5, 0.010, 0.012, 0.011])

    def step(x: int) -> int:
        fake.advance(next(durations))
        return x * 2

    with use_clock(fake):
        timed = time_callable(step, (21,), plan=RoundPlan(warmup=2, rounds=3))
    assert timed.result == 42
    assert timed.samples == pytest.approx([0.010, 0.012, 0.011])
    assert timed.metrics()["step_time_s"].unit == "s"


def test_time_callable_divides_by_iterations() -> None:
    fake = ManualClock()
    with use_clock(fake):
        timed = time_callable(lambda: fake.advance(0.002), plan=RoundPlan(warmup=0, rounds=2), iterations=5)
    assert timed.samples == pytest.approx([0.002, 0.002])


class _FakeStep:
    def __init__(self, clock: ManualClock, seconds: float) -> None:
        self.clock, self.seconds, self.calls = clock, seconds, 0

    def step(self, inputs: Any, targets: Any, loss_fn: Any) -> float:
        self.calls += 1
        self.clock.advance(self.seconds)
        return float(loss_fn(inputs, targets))


def test_training_metrics_from_step_and_twin() -> None:
    fake = ManualClock()
    step, twin = _FakeStep(fake, 0.010), _FakeStep(fake, 0.006)
    with use_clock(fake):
        result = benchmark_training(
            step,
            [(1.0, 2.0), (3.0, 4.0)],
            global_batch_size=64,
            loss_fn=lambda x, y: x + y,
            twin=twin.step,
            plan=RoundPlan(warmup=1, rounds=4),
        )
    m = result.metrics
    assert m["step_time_s"].samples == pytest.approx([0.010] * 4)
    assert m["throughput_samples_per_s"].samples == pytest.approx([6400.0] * 4)
    assert m["exposed_comm_fraction"].samples == pytest.approx([0.4] * 4)
    assert result.exposed_comm_fraction_of_medians == pytest.approx(0.4)
    assert m["compute_comm_ratio"].samples == pytest.approx([1.5] * 4)
    assert m["comm_bytes_per_step"].samples == [0.0] * 4  # no collective issued
    assert step.calls == twin.calls == 5
    assert result.losses == [3.0, 7.0, 3.0, 7.0, 3.0]  # batches cycled, warm-up included


def test_without_exposed_communication_the_ratio_is_infinite() -> None:
    fake = ManualClock()
    with use_clock(fake):
        result = benchmark_training(
            _FakeStep(fake, 0.25),
            [(0.0, 0.0)],
            global_batch_size=1,
            loss_fn=lambda x, y: 0.0,
            twin=_FakeStep(fake, 0.25),
            plan=RoundPlan(warmup=0, rounds=2),
        )
    assert all(math.isinf(r) for r in result.metrics["compute_comm_ratio"].samples)
    assert result.metrics["exposed_comm_fraction"].samples == [0.0, 0.0]


def test_training_without_twin_has_no_exposed_fraction() -> None:
    fake = ManualClock()
    with use_clock(fake):
        result = benchmark_training(
            _FakeStep(fake, 0.01),
            [(0.0, 0.0)],
            global_batch_size=1,
            loss_fn=lambda x, y: 0.0,
            plan=RoundPlan(warmup=0, rounds=2),
        )
    assert "exposed_comm_fraction" not in result.metrics
    assert result.exposed_comm_fraction_of_medians is None


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"batches": []}, "at least one"),
        ({"global_batch_size": 0}, "global_batch_size"),
        ({"strategy": object()}, "strategy must have a .step"),
        ({"twin": 3}, "twin must have a .step"),
    ],
    ids=["no-batches", "batch-size", "strategy", "twin"],
)
def test_bad_training_arguments_are_named(kwargs: dict[str, Any], message: str) -> None:
    args: dict[str, Any] = {
        "strategy": lambda x, y, f: 0.0,
        "batches": [(0, 0)],
        "global_batch_size": 1,
        "loss_fn": lambda x, y: 0.0,
    }
    args.update(kwargs)
    strategy, batches = args.pop("strategy"), args.pop("batches")
    with pytest.raises((ValueError, TypeError), match=message):
        benchmark_training(strategy, batches, **args)
