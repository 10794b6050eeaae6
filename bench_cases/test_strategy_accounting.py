"""Every strategy reports the bytes it hands to communication, routes them through one interceptor, and has
a no-communication twin that sends nothing; the strategy's count and the runner's count are one figure.
In a one-rank world nothing leaves the process, so every count is zero there."""

from __future__ import annotations

import importlib.util
import math
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest
import torch.nn.functional as F

from pytest_dmlbench.data import synthetic_classification
from pytest_dmlbench.measure import comm
from pytest_dmlbench.measure.comm import instrument_collectives
from pytest_dmlbench.strategies import Strategy, build
from pytest_dmlbench.training import models
from pytest_dmlbench.training.reference import batch_for, raise_on_all_ranks

# The correctness suite CI runs: pytest --dmlbench --world-size 2 -m correctness
pytestmark = pytest.mark.correctness

FLOAT32 = 4


@contextmanager
def intercepted() -> Iterator[list[tuple[str, int]]]:
    """Record every operation that passes the comm interceptor, then restore the previous one."""
    seen: list[tuple[str, int]] = []

    def record(op: str, size: int, call: Callable[[], Any]) -> Any:
        seen.append((op, size))
        return call()

    previous = comm.set_interceptor(record)
    try:
        yield seen
    finally:
        comm.set_interceptor(previous)


def one_step(strategy: Strategy) -> list[tuple[str, int]]:
    """One step under both the comm interceptor and an outer collective counter; checks that the outer
    counter saw the bytes the strategy counted."""
    batch = synthetic_classification(8 * strategy.world_size, (16,), 10, seed=0)
    with instrument_collectives() as counter, intercepted() as seen:
        strategy.step(*batch_for(strategy, batch), F.cross_entropy)
    assert counter.bytes == strategy.comm_bytes_last_step, (counter.bytes, strategy.comm_bytes_last_step)
    return seen


def expected_bytes(name: str, parameters: int, step: int, world_size: int) -> dict[str, int] | None:
    """Documented bytes per step for a float32 model without buffers (``None``: not a fixed formula)."""
    p = parameters * FLOAT32
    table: dict[str, dict[str, int]] = {
        "ddp": {"all_reduce": p},
        "allreduce": {"all_reduce": p},
        "bucketed": {"all_reduce": p},
        "fp16": {"all_reduce": parameters * 2},
        "ps": {"gather": p, "broadcast": p},
        "local_sgd": {"all_reduce": p},
        "powersgd": {"all_reduce": p},  # start_iter=2: exact all-reduce on the first steps
    }
    if name == "powersgd" and step > 2 and world_size > 1:
        return None
    return {op: size if world_size > 1 else 0 for op, size in table[name].items()}


def check_accounting(name: str, **options: Any) -> None:
    model = models.tiny_mlp(16, 32, 10, seed=0)
    parameters = sum(p.numel() for p in model.parameters())
    strategy = build(name, model, lr=0.1, **options)
    for step in (1, 2, 3):
        seen = one_step(strategy)
        totals: dict[str, int] = {}
        for op, size in seen:
            totals[op] = totals.get(op, 0) + size
        expected = expected_bytes(name, parameters, step, strategy.world_size)
        if expected is not None and strategy.world_size == 1:  # ops a one-rank step skips count nothing either
            expected = {op: size for op, size in expected.items() if op in totals}
        error = None
        if totals != strategy.comm_bytes_by_op or sum(totals.values()) != strategy.comm_bytes_last_step:
            error = f"{name}: interceptor saw {totals}, strategy counted {strategy.comm_bytes_by_op}"
        elif expected is not None and totals != expected:
            error = f"{name} step {step}: counted {totals}, documented {expected}"
        elif expected is None and not 0 < strategy.comm_bytes_last_step < parameters * FLOAT32:
            error = f"{name} step {step}: compressed step sent {strategy.comm_bytes_last_step} bytes"
        raise_on_all_ranks(error, what=f"{name} byte accounting")
    twin = strategy.twin()
    seen = one_step(twin)
    twin_error = None
    if seen or twin.comm_bytes_last_step:
        twin_error = f"{name} twin communicated: {seen}, {twin.comm_bytes_last_step} bytes"
    raise_on_all_ranks(twin_error, what=f"{name} twin")


NAMES = ["ddp", "allreduce", "bucketed", "fp16", "powersgd", "ps", "local_sgd"]


@pytest.mark.dmlbench(scaling=True)
@pytest.mark.parametrize("name", NAMES)
def test_bytes_counted_routed_and_left_out_by_the_twin(dist: Any, name: str) -> None:
    check_accounting(name)


@pytest.mark.dmlbench(world_size=2)
def test_local_sgd_sends_only_on_synchronising_steps(dist: Any) -> None:
    model = models.tiny_mlp(16, 32, 10, seed=0)
    parameters = sum(p.numel() for p in model.parameters())
    strategy = build("local_sgd", model, lr=0.1, period=2)
    sent = [sum(size for _, size in one_step(strategy)) for _ in range(4)]
    assert sent == [0, parameters * FLOAT32, 0, parameters * FLOAT32]


@pytest.mark.dmlbench(world_size=2)
def test_pipeline_sends_activations_and_its_twin_does_not(dist: Any) -> None:
    model = models.tiny_mlp(16, 32, 10, seed=0)
    strategy = build("pipeline", model, lr=0.1, stages=2, micro_batches=2)
    batch = synthetic_classification(8, (16,), 10, seed=0)
    strategy.step(*batch_for(strategy, batch), F.cross_entropy)
    activation = 4 * 32 * FLOAT32  # a micro-batch of 4 samples leaving the first Linear(16, 32)
    header = 10 * 8
    if strategy.rank == 0:  # sends 2 activations + header, receives 2 gradients
        assert strategy.comm_bytes_by_op == {"send": 2 * activation + header, "recv": 2 * activation}
    else:
        assert strategy.comm_bytes_by_op == {"recv": 2 * activation + header, "send": 2 * activation}
    twin = strategy.twin()
    twin.step(*batch_for(twin, batch), F.cross_entropy)
    assert twin.comm_bytes_last_step == 0


def check_bytes_agree(strategy: Strategy, runner_bytes: list[float]) -> None:
    """The strategy's own count of its last step and the runner's count of the same step are one figure
    (both come from :mod:`pytest_dmlbench.measure.comm`); checked on every rank, as the runner agrees them: the mean
    over ranks (every rank's count where they count alike)."""
    import torch
    import torch.distributed as td

    mine = torch.tensor([float(strategy.comm_bytes_last_step)], dtype=torch.float64)
    td.all_reduce(mine, op=td.ReduceOp.SUM)
    mean = mine.item() / td.get_world_size()
    error = None
    if mean != runner_bytes[-1]:
        error = (f"{strategy.name}: strategy.comm_bytes_last_step {mean:.0f} (mean over ranks) but the "
                 f"runner's comm_bytes_per_step of that step is {runner_bytes[-1]:.0f}")
    raise_on_all_ranks(error, what=f"{strategy.name} byte agreement")


def train_once(dmlbench: Any, strategy: Strategy, model_input: tuple[int, ...]) -> list[float]:
    batch = synthetic_classification(8 * strategy.world_size, model_input, 10, seed=0)
    inputs, targets = batch_for(strategy, batch)
    result = dmlbench.train(strategy, [(inputs, targets)], global_batch_size=8 * strategy.world_size,
                            loss_fn=F.cross_entropy, rounds=3, warmup=1)
    samples: list[float] = result.metrics["comm_bytes_per_step"].samples
    return samples


AGREEMENT = [
    ("ddp", {}), ("allreduce", {}), ("bucketed", {}), ("fp16", {}), ("powersgd", {}), ("ps", {}),
    ("local_sgd", {"period": 1}), ("pipeline", {"stages": 2, "micro_batches": 2}),
    ("robust", {"aggregator": "median", "f": 0}),
]


@pytest.mark.dmlbench(world_size=2)
@pytest.mark.parametrize(("name", "options"), AGREEMENT, ids=[name for name, _ in AGREEMENT])
def test_strategy_and_runner_count_the_same_bytes(dist: Any, dmlbench: Any, name: str, options: dict[str, Any]) -> None:
    strategy = build(name, models.tiny_mlp(16, 32, 10, seed=0), lr=0.1, **options)
    check_bytes_agree(strategy, train_once(dmlbench, strategy, (16,)))


@pytest.mark.dmlbench(world_size=2)
def test_ddp_with_batchnorm_buffers_counts_the_same_bytes(dist: Any, dmlbench: Any) -> None:
    strategy = build("ddp", models.small_bn_cnn(seed=0), lr=0.1)
    runner_bytes = train_once(dmlbench, strategy, (3, 8, 8))
    buffers = sum(b.numel() * b.element_size() for b in strategy.model.buffers())
    assert buffers > 0 and strategy.comm_bytes_by_op.get("broadcast") == buffers
    check_bytes_agree(strategy, runner_bytes)


@pytest.mark.dmlbench(world_size=2)
def test_a_strategy_counting_its_own_way_is_caught(dist: Any, dmlbench: Any) -> None:
    """Negative control: a strategy whose byte count leaves out part of what it sent disagrees."""
    strategy = build("allreduce", models.tiny_mlp(16, 32, 10, seed=0), lr=0.1)
    runner_bytes = train_once(dmlbench, strategy, (16,))
    strategy.comm_bytes_last_step //= 2
    with pytest.raises(AssertionError, match="runner's comm_bytes_per_step of that step is"):
        check_bytes_agree(strategy, runner_bytes)


needs_deepspeed = pytest.mark.skipif(
    importlib.util.find_spec("deepspeed") is None,
    reason="DeepSpeed is not installed: pip install 'pytest-dmlbench[deepspeed]'",
)


def deepspeed_bytes(parameters: int, zero_stage: int, world_size: int) -> dict[str, int]:
    """Documented bytes per step of ``deepspeed`` (see pytest_dmlbench/strategies/zero.py); nothing leaves
    the process in a one-rank world."""
    if world_size == 1:
        return {"all_reduce": 0}
    if zero_stage == 0:
        return {"all_reduce": parameters * FLOAT32}
    return {"all_reduce": parameters * FLOAT32 + FLOAT32,
            "all_gather": 2 * FLOAT32 * math.ceil(parameters / (2 * world_size))}


@needs_deepspeed
@pytest.mark.dmlbench(scaling=True, timeout=300)
@pytest.mark.parametrize("zero_stage", [0, 1, 2], ids=["zero0", "zero1", "zero2"])
def test_deepspeed_bytes_counted_routed_and_left_out_by_the_twin(dist: Any, zero_stage: int) -> None:
    model = models.tiny_mlp(16, 32, 10, seed=0)
    parameters = sum(p.numel() for p in model.parameters())
    strategy = build("deepspeed", model, lr=0.1, zero_stage=zero_stage)
    expected = deepspeed_bytes(parameters, zero_stage, strategy.world_size)
    for step in (1, 2):
        totals: dict[str, int] = {}
        for op, size in one_step(strategy):
            totals[op] = totals.get(op, 0) + size
        error = None
        if totals != strategy.comm_bytes_by_op:
            error = f"interceptor saw {totals}, strategy counted {strategy.comm_bytes_by_op}"
        elif totals != expected:
            error = f"zero{zero_stage} step {step}: counted {totals}, documented {expected}"
        raise_on_all_ranks(error, what="deepspeed byte accounting")
    twin = strategy.twin()
    seen = one_step(twin)
    raise_on_all_ranks(f"twin communicated {seen}" if seen or twin.comm_bytes_last_step else None,
                       what="deepspeed twin")
