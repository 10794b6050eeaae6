"""Training throughput, exposed communication, bytes and memory of every strategy, the seed studies'
workloads (ResNet-50 on CIFAR-sized images, UNet segmentation, a small Transformer), weak scaling of DDP,
and a convergence case that fails when training does not learn."""

from __future__ import annotations

import importlib.util
import time
from collections.abc import Callable
from typing import Any

import pytest
import torch
import torch.distributed as td
import torch.nn.functional as F

from pytest_dmlbench.data import (
    shard,
    synthetic_classification,
    synthetic_images,
    synthetic_segmentation,
    token_sequences,
)
from pytest_dmlbench.measure.rounds import smoke_or
from pytest_dmlbench.strategies import build
from pytest_dmlbench.training import models

PER_RANK_BATCH = 16
ROUNDS = 10


def shard_of(batch: tuple[torch.Tensor, torch.Tensor], dist: Any) -> list[tuple[torch.Tensor, torch.Tensor]]:
    inputs, targets = shard(batch, dist.rank, dist.world_size)
    return [(inputs, targets)]


STRATEGY_OPTIONS: dict[str, dict[str, Any]] = {
    "ddp": {},
    "allreduce": {},
    "bucketed": {},
    "ps": {},
    "local_sgd": {"period": 1},
    "fp16": {},
    "powersgd": {},
    "fsdp": {},
}


@pytest.mark.dmlbench(timeout=600)
@pytest.mark.parametrize("name", list(STRATEGY_OPTIONS), ids=list(STRATEGY_OPTIONS))
def test_strategy_training(dist: Any, dmlbench: Any, name: str) -> None:
    """Every strategy on the seed studies' small CNN: the same model, data and world."""
    strategy = build(name, models.small_cnn(seed=0), lr=0.05, momentum=0.9, **STRATEGY_OPTIONS[name])
    batch = synthetic_images(PER_RANK_BATCH * dist.world_size, seed=1)
    strategy.step(*shard_of(batch, dist)[0], F.cross_entropy)
    result = dmlbench.train(strategy, shard_of(batch, dist), global_batch_size=PER_RANK_BATCH * dist.world_size,
                            loss_fn=F.cross_entropy, twin=strategy.twin(), rounds=ROUNDS)
    assert all(loss == loss for loss in result.losses), "a training loss is NaN"


MLP_WIDTH = 512  # hidden width of the model-parallel comparison: divisible by every world size up to 8


@pytest.mark.dmlbench(timeout=600)
@pytest.mark.parametrize("name", ["ddp", "fsdp", "tensor_parallel"])
def test_model_parallel_training(dist: Any, dmlbench: Any, name: str) -> None:
    """Tensor parallelism beside data parallelism (DDP, FSDP2) on one MLP and one global batch: the
    data-parallel strategies give each rank its shard of the batch, ``tensor_parallel`` gives every rank the
    whole batch and a slice of each layer pair (``strategy.data_rank``/``data_world_size`` say which)."""
    strategy = build(name, models.tiny_mlp(in_features=256, hidden=MLP_WIDTH, seed=0), lr=0.05, momentum=0.9)
    batch = synthetic_classification(PER_RANK_BATCH * dist.world_size, shape=(256,), seed=1)
    assert strategy.data_rank is not None  # each of these strategies gives every rank data
    shard_inputs, shard_targets = shard(batch, strategy.data_rank, strategy.data_world_size)
    strategy.step(shard_inputs, shard_targets, F.cross_entropy)
    result = dmlbench.train(strategy, [(shard_inputs, shard_targets)],
                            global_batch_size=PER_RANK_BATCH * dist.world_size, loss_fn=F.cross_entropy,
                            twin=strategy.twin(), rounds=ROUNDS)
    assert all(loss == loss for loss in result.losses), "a training loss is NaN"


@pytest.mark.skipif(importlib.util.find_spec("deepspeed") is None,
                    reason="DeepSpeed is not installed: pip install 'pytest-dmlbench[deepspeed]'")
@pytest.mark.dmlbench(timeout=600)
@pytest.mark.parametrize("zero_stage", [0, 1, 2], ids=["zero0", "zero1", "zero2"])
def test_deepspeed_training(dist: Any, dmlbench: Any, zero_stage: int) -> None:
    """DeepSpeed's engine (ZeRO 0-2) on the same model, data and world as test_strategy_training."""
    strategy = build("deepspeed", models.small_cnn(seed=0), lr=0.05, momentum=0.9, zero_stage=zero_stage)
    batch = synthetic_images(PER_RANK_BATCH * dist.world_size, seed=1)
    strategy.step(*shard_of(batch, dist)[0], F.cross_entropy)
    dmlbench.train(strategy, shard_of(batch, dist), global_batch_size=PER_RANK_BATCH * dist.world_size,
                   loss_fn=F.cross_entropy, twin=strategy.twin(), rounds=ROUNDS)


WORKLOADS: dict[str, tuple[Callable[[], torch.nn.Module], Callable[[int], tuple[torch.Tensor, torch.Tensor]],
                           Callable[..., torch.Tensor], int]] = {
    "resnet50-cifar": (lambda: models.resnet50(seed=0), lambda n: synthetic_images(n, seed=1), F.cross_entropy, 4),
    "unet-segmentation": (lambda: models.small_unet(seed=0), lambda n: synthetic_segmentation(n, seed=1),
                          F.cross_entropy, 8),
    "transformer-tokens": (lambda: models.small_transformer(seed=0), lambda n: token_sequences(n, seed=1),
                           F.cross_entropy, 32),
}


@pytest.mark.dmlbench(timeout=900)
@pytest.mark.parametrize("workload", list(WORKLOADS), ids=list(WORKLOADS))
def test_seed_workload_ddp(dist: Any, dmlbench: Any, workload: str) -> None:
    """The seed studies' models under DDP on synthetic data (CIFAR-10 itself is read by
    ``pytest_dmlbench.data.load_cifar10`` when a local copy exists; benchmarks never download)."""
    make_model, make_data, loss_fn, per_rank = WORKLOADS[workload]
    per_rank = smoke_or(dmlbench.block, per_rank)  # a smoke run: one sample a rank, the same model and path
    strategy = build("ddp", make_model(), lr=0.01, momentum=0.9)
    batch = make_data(per_rank * dist.world_size)
    dmlbench.train(strategy, shard_of(batch, dist), global_batch_size=per_rank * dist.world_size,
                   loss_fn=loss_fn, twin=strategy.twin(), rounds=4, warmup=1)


@pytest.mark.dmlbench(scaling=True, timeout=600)
def test_ddp_weak_scaling(dist: Any, dmlbench: Any) -> None:
    """Fixed batch per rank: ideal weak scaling keeps the step time and multiplies throughput by N."""
    strategy = build("ddp", models.small_cnn(seed=0), lr=0.05)
    batch = synthetic_images(PER_RANK_BATCH * dist.world_size, seed=1)
    dmlbench.train(strategy, shard_of(batch, dist), global_batch_size=PER_RANK_BATCH * dist.world_size,
                   loss_fn=F.cross_entropy, twin=strategy.twin(), rounds=ROUNDS)


@pytest.mark.dmlbench(world_size=2)
def test_pipeline_bubble(dist: Any, dmlbench: Any) -> None:
    """GPipe over 2 stages: step time and the schedule's bubble fraction (S-1)/(M+S-1)."""
    stages, micro_batches = 2, 4
    strategy = build("pipeline", models.tiny_mlp(seed=0), lr=0.05, stages=stages, micro_batches=micro_batches)
    batch = synthetic_classification(64, seed=1)
    dmlbench.train(strategy, [batch], global_batch_size=64, loss_fn=F.cross_entropy, rounds=ROUNDS)
    dmlbench.record("bubble_fraction", (stages - 1) / (micro_batches + stages - 1))


TARGET_ACCURACY = 0.6  # chance is about 0.13 (the largest class); 512 samples of this task reach ~0.75


def check_learned(accuracy: float) -> None:
    assert accuracy >= TARGET_ACCURACY, f"did not learn: accuracy {accuracy:.3f} < {TARGET_ACCURACY} after 300 steps"


def evaluate(model: torch.nn.Module, inputs: torch.Tensor, targets: torch.Tensor) -> float:
    with torch.no_grad():
        return float((model(inputs).argmax(dim=1) == targets).float().mean())


@pytest.mark.dmlbench
@pytest.mark.parametrize(("lr", "learns"), [(0.1, True), (1e-9, False)], ids=["learns", "negative-control-frozen"])
def test_time_to_accuracy(dist: Any, dmlbench: Any, lr: float, learns: bool) -> None:
    """DDP on a learnable task must reach the target accuracy; with lr=1e-9 (a model that never changes)
    the same check must fail, so a run that silently does not learn is caught."""
    data, labels = synthetic_classification(1024, seed=3)  # one teacher: train on half, test on the rest
    inputs, targets, test_x, test_y = data[:512], labels[:512], data[512:], labels[512:]
    strategy = build("ddp", models.tiny_mlp(seed=0), lr=lr, momentum=0.9)
    local_inputs, local_targets = shard((inputs, targets), dist.rank, dist.world_size)
    begin = time.perf_counter()
    reached = float("nan")
    accuracy = 0.0
    for step in range(300):
        strategy.step(local_inputs, local_targets, F.cross_entropy)
        if step % 10 == 9:
            accuracy = evaluate(strategy.model, test_x, test_y)
            agreed = torch.tensor([accuracy], dtype=torch.float64)
            td.all_reduce(agreed, op=td.ReduceOp.MIN)
            accuracy = float(agreed)
            if accuracy >= TARGET_ACCURACY:
                reached = time.perf_counter() - begin
                break
    elapsed = torch.tensor([reached], dtype=torch.float64)
    td.all_reduce(elapsed, op=td.ReduceOp.MAX)
    if learns:
        dmlbench.record("accuracy", accuracy)
        dmlbench.record("time_to_accuracy_s", float(elapsed))
        check_learned(accuracy)
    else:
        with pytest.raises(AssertionError, match="did not learn"):
            check_learned(accuracy)
