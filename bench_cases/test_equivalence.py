"""Correctness of the training strategies on real process groups.

Every case body runs on every rank. The checks themselves are plain functions (``check_*``), also
runnable by any launcher that initialises a default process group; the negative controls feed
deliberately broken strategies to the same checks and require them to fail.
"""

from __future__ import annotations

import copy
import importlib.util
from collections.abc import Callable
from typing import Any

import pytest
import torch
import torch.distributed as tdist
import torch.nn.functional as F
from torch import nn

from pytest_dmlbench.data import shard, shard_bounds, synthetic_classification, token_sequences
from pytest_dmlbench.strategies import Strategy, build
from pytest_dmlbench.strategies.allreduce import AllReduceStrategy
from pytest_dmlbench.strategies.base import resolve_device
from pytest_dmlbench.strategies.bucketed import BucketedStrategy
from pytest_dmlbench.strategies.pipeline import split_stages
from pytest_dmlbench.training import models
from pytest_dmlbench.training.reference import (
    assert_close_on_all_ranks,
    assert_identical_across_ranks,
    batch_for,
    check_matches_reference,
    disagreeing_ranks,
    flat,
    flat_grads,
    relative_error,
    tolerances,
)

# The correctness suite CI runs: pytest --dmlbench --world-size 2 -m correctness
pytestmark = pytest.mark.correctness

GLOBAL_BATCH = 16
SHARD = 4  # samples per data-parallel rank in the reference checks
STEPS = 3
LR = 0.1
Batch = tuple[torch.Tensor, torch.Tensor]


# ---------------------------------------------------------------------------------------------- fixtures
def make_model(name: str, dtype: torch.dtype = torch.float64, seed: int = 0) -> nn.Module:
    """Small members of the zoo, sized so the whole matrix runs in seconds at world size 4."""
    builders: dict[str, Callable[[], nn.Module]] = {
        "mlp": lambda: models.tiny_mlp(16, 32, 10, seed=seed),
        "wide_mlp": lambda: models.tiny_mlp(16, 64, 10, seed=seed),  # tensor parallelism at 64 ranks
        "widest_mlp": lambda: models.tiny_mlp(16, 1024, 10, seed=seed),  # and at 1024
        "cnn": lambda: models.small_cnn(10, channels=(4, 8), hidden=16, seed=seed),
        "transformer": lambda: models.small_transformer(32, 8, d_model=16, nhead=2, layers=1, seed=seed),
        "bn_cnn": lambda: models.small_bn_cnn(10, channels=4, seed=seed),
    }
    return builders[name]().to(dtype)


def make_batches(model_name: str, dtype: torch.dtype, steps: int = STEPS, n: int = GLOBAL_BATCH) -> list[Batch]:
    """``steps`` global batches of ``n`` samples, identical on every rank (fixed seeds)."""
    batches = []
    for step in range(steps):
        if model_name in ("mlp", "wide_mlp", "widest_mlp"):
            batches.append(synthetic_classification(n, (16,), 10, seed=100 + step, dtype=dtype))
        elif model_name in ("cnn", "bn_cnn"):
            size = 32 if model_name == "cnn" else 8
            batches.append(synthetic_classification(n, (3, size, size), 10, seed=100 + step, dtype=dtype))
        elif model_name == "transformer":
            batches.append(token_sequences(n, 8, 32, 2, seed=100 + step))
        else:
            raise ValueError(f"no data for model {model_name!r}")
    return batches


def build_pair(
    name: str, model_name: str, dtype: torch.dtype, momentum: float, **options: Any
) -> tuple[Strategy, nn.Module]:
    """A strategy and an untouched copy of its initial model for the reference."""
    model = make_model(model_name, dtype)
    reference = copy.deepcopy(model)
    return build(name, model, lr=LR, momentum=momentum, **options), reference


# ----------------------------------------------------------------------------------------------- checks
def check_strategy_matches_reference(
    name: str, model_name: str, dtype: torch.dtype, momentum: float, **options: Any
) -> None:
    """k steps of ``name``: ranks bit-identical and equal to single-process SGD on the global batch."""
    strategy, reference = build_pair(name, model_name, dtype, momentum, **options)
    rtol, atol = tolerances(dtype)
    batches = make_batches(model_name, dtype, n=SHARD * strategy.data_world_size)
    check_matches_reference(strategy, reference, batches, F.cross_entropy, rtol=rtol, atol=atol)


def check_against(strategy: Strategy, model_name: str, dtype: torch.dtype = torch.float64) -> None:
    """Run an already-built strategy (e.g. a faulty one) through the reference check on the mlp data."""
    reference = make_model(model_name, dtype)
    reference.load_state_dict(strategy.model.state_dict())
    rtol, atol = tolerances(dtype)
    check_matches_reference(strategy, reference, make_batches(model_name, dtype), F.cross_entropy, rtol=rtol, atol=atol)


def train_params(name: str, model_name: str, momentum: float, **options: Any) -> torch.Tensor:
    strategy, _ = build_pair(name, model_name, torch.float64, momentum, **options)
    for batch in make_batches(model_name, torch.float64):
        strategy.step(*batch_for(strategy, batch), F.cross_entropy)
    return flat(strategy.model.parameters())


def check_strategies_agree(names: list[str], model_name: str, momentum: float) -> None:
    """The exact strategies end at the same parameters (float64, rtol 1e-10)."""
    results = {name: train_params(name, model_name, momentum) for name in names}
    first = names[0]
    for name in names[1:]:
        assert_close_on_all_ranks(results[name], results[first], rtol=1e-10, atol=1e-12, what=f"{name} vs {first}")


def check_local_sgd_period1_equals_ddp(model_name: str, momentum: float) -> None:
    ddp_params = train_params("ddp", model_name, momentum)
    local_params = train_params("local_sgd", model_name, momentum, period=1)
    assert_identical_across_ranks(local_params, what="local_sgd parameters")
    assert_close_on_all_ranks(local_params, ddp_params, rtol=1e-10, atol=1e-12, what="local_sgd(period=1) vs ddp")


def check_local_sgd_period(period: int) -> None:
    """Ranks agree right after every averaging step and (with >1 rank) drift apart in between."""
    strategy, _ = build_pair("local_sgd", "mlp", torch.float64, 0.0, period=period)
    world = tdist.get_world_size()
    for step, batch in enumerate(make_batches("mlp", torch.float64, steps=2 * period), start=1):
        strategy.step(*batch_for(strategy, batch), F.cross_entropy)
        params = flat(strategy.model.parameters())
        if step % period == 0:
            assert_identical_across_ranks(params, what=f"local_sgd parameters after sync step {step}")
        elif world > 1:
            assert disagreeing_ranks(params), f"local_sgd ranks identical after unsynchronised step {step}"


class RecordingLoss:
    """Cross-entropy that keeps every output it is given (per micro-batch on the last pipeline stage)."""

    def __init__(self) -> None:
        self.outputs: list[torch.Tensor] = []

    def __call__(self, out: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        self.outputs.append(out.detach().cpu())
        return F.cross_entropy(out, target)


def check_pipeline_equals_unsplit(stages: int, micro_batches: int, momentum: float, n: int = GLOBAL_BATCH) -> None:
    """Pipeline loss, outputs, gradients and parameters equal the unsplit model's (float64; global batches of
    ``n`` samples)."""
    dtype = torch.float64
    with models.seeded(0):
        model = nn.Sequential(*models.tiny_mlp(16, 32, 10), nn.ReLU(), nn.Linear(10, 10)).to(dtype)
    reference = copy.deepcopy(model)
    strategy = build("pipeline", model, lr=LR, momentum=momentum, stages=stages, micro_batches=micro_batches)
    assert isinstance(strategy.model, nn.Module)
    reference_stage = split_stages(reference, stages)[strategy.rank % stages]
    optimizer = torch.optim.SGD(reference.parameters(), lr=LR, momentum=momentum)
    rtol, atol = tolerances(dtype)
    for step, batch in enumerate(make_batches("mlp", dtype, n=n), start=1):
        recording_loss = RecordingLoss()
        assert strategy.data_rank is not None
        inputs, targets = shard(batch, strategy.data_rank, strategy.data_world_size)
        loss = strategy.step(inputs, targets, recording_loss)
        optimizer.zero_grad(set_to_none=True)
        F.cross_entropy(reference(batch[0]), batch[1]).backward()  # type: ignore[no-untyped-call]  # untyped in torch
        with torch.no_grad():
            expected_out = reference(inputs)
        expected_loss = float(F.cross_entropy(expected_out, targets))
        if strategy.rank % stages == stages - 1:
            got = torch.cat([torch.tensor([loss], dtype=dtype), torch.cat(recording_loss.outputs).flatten()])
            expected = torch.cat([torch.tensor([expected_loss], dtype=dtype), expected_out.flatten()])
        else:  # the other stages return nan and see no outputs
            got = torch.tensor([float(loss != loss)], dtype=dtype)
            expected = torch.ones(1, dtype=dtype)
        assert_close_on_all_ranks(got, expected, rtol=rtol, atol=atol, what=f"pipeline loss and outputs, step {step}")
        assert_close_on_all_ranks(
            flat_grads(strategy.model.parameters()),
            flat_grads(reference_stage.parameters()),
            rtol=rtol,
            atol=atol,
            what=f"stage gradients step {step}",
        )
        optimizer.step()
        params = flat(strategy.model.parameters())
        assert_close_on_all_ranks(
            params,
            flat(reference_stage.parameters()),
            rtol=rtol,
            atol=atol,
            what=f"stage parameters step {step}",
        )
        assert_identical_across_ranks(params, what="stage parameters", key=strategy.rank % stages)


def exact_first_step_gradient(model_name: str, dtype: torch.dtype,
                              n: int = GLOBAL_BATCH) -> tuple[nn.Module, torch.Tensor, Batch]:
    model = make_model(model_name, dtype)
    reference = copy.deepcopy(model)
    batch = make_batches(model_name, dtype, steps=1, n=n)[0]
    F.cross_entropy(reference(batch[0]), batch[1]).backward()  # type: ignore[no-untyped-call]  # untyped in torch
    return model, flat_grads(reference.parameters()), batch


def fp16_bound(world_size: int) -> float:
    """Relative L2 error bound of the fp16 hook's averaged gradient (see the ``ddp`` module docstring)."""
    return (world_size + 2) * 2.0**-11


def check_fp16_gradient_error(model_name: str, n: int = GLOBAL_BATCH) -> None:
    """The fp16 hook's averaged gradient of one step on a global batch of ``n`` samples is within its bound."""
    model, exact, batch = exact_first_step_gradient(model_name, torch.float32, n)
    strategy = build("fp16", model, lr=LR)
    strategy.step(*batch_for(strategy, batch), F.cross_entropy)
    error = relative_error(flat_grads(strategy.model.parameters()), exact)
    assert 0 < error <= fp16_bound(strategy.world_size), (
        f"fp16 gradient relative error {error:.2e} outside (0, {fp16_bound(strategy.world_size):.2e}]"
    )


def check_powersgd_projection(model_name: str, n: int = GLOBAL_BATCH) -> None:
    """Without error feedback, each compressed gradient is an orthogonal projection of the exact one (global
    batches of ``n`` samples)."""
    dtype = torch.float32
    model = make_model(model_name, dtype)
    reference = copy.deepcopy(model)
    strategy = build("powersgd", model, lr=LR, start_iter=2, error_feedback=False, warm_start=False)
    rtol, atol = tolerances(dtype)
    compressed = 0
    for step, batch in enumerate(make_batches(model_name, dtype, steps=4, n=n), start=1):
        reference.load_state_dict(strategy.model.state_dict())
        reference.zero_grad(set_to_none=True)
        F.cross_entropy(reference(batch[0]), batch[1]).backward()  # type: ignore[no-untyped-call]  # untyped in torch
        strategy.step(*batch_for(strategy, batch), F.cross_entropy)
        for got_param, exact_param in zip(strategy.model.parameters(), reference.parameters(), strict=True):
            assert got_param.grad is not None and exact_param.grad is not None
            got, exact = got_param.grad.cpu(), exact_param.grad
            if step <= 2 or exact.dim() <= 1:  # warm-up steps and vectors: plain all-reduce
                assert_close_on_all_ranks(got, exact, rtol=rtol, atol=atol, what=f"powersgd exact part, step {step}")
                continue
            g, e = got.reshape(got.shape[0], -1), exact.reshape(exact.shape[0], -1)
            compressed += int(not torch.allclose(g, e, rtol=rtol, atol=atol))
            scale = float(e.norm()) ** 2 + 1e-30
            assert float(g.norm()) ** 2 <= scale * (1 + 1e-4), f"||G'|| > ||G|| at step {step}"
            residual = float(((e - g) * g).sum()) / scale
            assert abs(residual) <= 1e-4, f"<G - G', G'> / ||G||^2 = {residual:.2e} at step {step}"
    assert compressed > 0, "powersgd never compressed a gradient: the hook is not active"


def check_trains(name: str, steps: int = 30, **options: Any) -> None:
    """Loss over the last five steps is clearly below that of the first five (same data every step)."""
    model = make_model("mlp", torch.float32)
    strategy = build(name, model, lr=0.2, **options)
    batch = synthetic_classification(64, (16,), 10, seed=7)
    losses = [strategy.step(*batch_for(strategy, batch), F.cross_entropy) for _ in range(steps)]
    first, last = sum(losses[:5]) / 5, sum(losses[-5:]) / 5
    assert last < 0.7 * first, f"{name} does not train: mean loss {first:.3f} -> {last:.3f}"


def check_batchnorm_buffers(name: str, **options: Any) -> None:
    """DDP's rule: before each forward every rank takes rank 0's buffers, then updates them on its shard."""
    dtype = torch.float64
    strategy = build(name, make_model("bn_cnn", dtype), lr=LR, **options)
    rank, world = strategy.rank, strategy.world_size
    for step, batch in enumerate(make_batches("bn_cnn", dtype), start=1):
        shadow = copy.deepcopy(strategy.model)
        rank0_buffers = flat(shadow.buffers()).clone()
        rank0_buffers = rank0_buffers.to(strategy.device)
        tdist.broadcast(rank0_buffers, 0)
        offset = 0
        with torch.no_grad():
            for buffer in shadow.buffers():
                buffer.copy_(rank0_buffers[offset : offset + buffer.numel()].view_as(buffer))
                offset += buffer.numel()
            shadow.train()(shard(batch, rank, world)[0].to(strategy.device))
        strategy.step(*batch_for(strategy, batch), F.cross_entropy)
        assert_close_on_all_ranks(
            flat(strategy.model.buffers()),
            flat(shadow.buffers()),
            rtol=1e-12,
            atol=1e-14,
            what=f"{name} BatchNorm buffers after step {step}",
        )
        assert_identical_across_ranks(flat(strategy.model.parameters()), what=f"{name} parameters")


def check_shards_cover_global_batch(n: int = GLOBAL_BATCH) -> None:
    """Gathering every rank's shard of ``arange(n)`` gives ``arange(n)``: each sample exactly once."""
    rank, world = tdist.get_rank(), tdist.get_world_size()
    mine = shard(torch.arange(n, device=resolve_device(None)), rank, world)
    assert mine.numel() == n // world and shard_bounds(n, rank, world) == (int(mine[0]), int(mine[-1]) + 1)
    gathered = [torch.empty_like(mine) for _ in range(world)]
    tdist.all_gather(gathered, mine)
    assert torch.equal(torch.cat(gathered).cpu(), torch.arange(n)), "shards do not tile the global batch"


# ------------------------------------------------------------------------------------ faulty strategies
class SkipSyncStrategy(AllReduceStrategy):
    """Broken on purpose: never synchronises gradients."""

    def _average_gradients(self) -> None:
        pass


class SumStrategy(AllReduceStrategy):
    """Broken on purpose: sums gradients over ranks without dividing by the world size."""

    def _average_gradients(self) -> None:
        for param in self.model.parameters():
            assert param.grad is not None
            tdist.all_reduce(param.grad)


class DropLastBucketStrategy(BucketedStrategy):
    """Broken on purpose: the last bucket's all-reduce is never issued (ranks keep their own gradients)."""

    def _reduce_bucket(self, index: int, buffer: torch.Tensor) -> Any:
        if index == len(self.buckets) - 1:
            return None
        return super()._reduce_bucket(index, buffer)


FAULTY: dict[str, Callable[[nn.Module], Strategy]] = {
    "skip_sync": lambda m: SkipSyncStrategy(m, lr=LR),
    "sum_not_mean": lambda m: SumStrategy(m, lr=LR),
    "drop_last_bucket": lambda m: DropLastBucketStrategy(m, lr=LR, bucket_mb=0.001),
}
# The failure each fault must cause: ranks that keep their own gradients drift apart; a sum keeps the ranks
# equal but moves every one of them away from the reference.
DRIFT_APART = r"parameters after step 1 not bit-identical across ranks: rank 1 != rank 0"
OFF_THE_REFERENCE = r"parameters vs single-process reference after step 1: \d+ of \d+ values differ beyond"
FAULT_FAILURES = {"skip_sync": DRIFT_APART, "sum_not_mean": OFF_THE_REFERENCE, "drop_last_bucket": DRIFT_APART}



# ------------------------------------------------------------------------------------------------ cases
EXACT = ["ddp", "allreduce", "bucketed", "ps", "local_sgd"]
MODELS = ["mlp", "cnn", "transformer"]
MOMENTA = [pytest.param(0.0, id="sgd"), pytest.param(0.9, id="momentum")]


def pinned(*world_sizes: int) -> list[Any]:
    """Parameters that pin the case's world size (for layouts that need a particular size)."""
    return [pytest.param(ws, marks=pytest.mark.dmlbench(world_size=ws), id=f"ws{ws}") for ws in world_sizes]


@pytest.mark.dmlbench(scaling=True)
@pytest.mark.dmlbench_smoke("model_name")
@pytest.mark.parametrize("momentum", MOMENTA)
@pytest.mark.parametrize("model_name", MODELS)
@pytest.mark.parametrize("name", EXACT)
def test_matches_single_process_reference_float64(dist: Any, name: str, model_name: str, momentum: float) -> None:
    check_strategy_matches_reference(name, model_name, torch.float64, momentum)


@pytest.mark.dmlbench(scaling=True)
@pytest.mark.parametrize("name", EXACT)
def test_matches_single_process_reference_float32(dist: Any, name: str) -> None:
    check_strategy_matches_reference(name, "cnn", torch.float32, 0.9)


@pytest.mark.parametrize("world_size", pinned(4))
@pytest.mark.parametrize("name", EXACT)
def test_matches_single_process_reference_at_four_ranks(dist: Any, world_size: int, name: str) -> None:
    """The world-size-4 selection that runs whatever ``--world-size`` says (CI runs at world size 2)."""
    check_strategy_matches_reference(name, "mlp", torch.float64, 0.9)


@pytest.mark.parametrize("world_size", pinned(2, 4))
@pytest.mark.parametrize("momentum", MOMENTA)
def test_dedicated_parameter_server_matches_reference(dist: Any, world_size: int, momentum: float) -> None:
    check_strategy_matches_reference("ps", "mlp", torch.float64, momentum, dedicated_server=True)


@pytest.mark.dmlbench(scaling=True)
@pytest.mark.dmlbench_smoke("model_name")
@pytest.mark.parametrize("model_name", ["mlp", "cnn"])
def test_exact_strategies_agree(dist: Any, model_name: str) -> None:
    check_strategies_agree(["ddp", "allreduce", "bucketed", "ps"], model_name, 0.9)


@pytest.mark.dmlbench(scaling=True)
@pytest.mark.parametrize("momentum", MOMENTA)
def test_local_sgd_period_one_equals_ddp(dist: Any, momentum: float) -> None:
    check_local_sgd_period1_equals_ddp("mlp", momentum)


@pytest.mark.dmlbench(scaling=True)
def test_local_sgd_synchronises_every_period(dist: Any) -> None:
    check_local_sgd_period(3)


@pytest.mark.parametrize("micro_batches", [1, 2], ids=["mb1", "mb2"])
@pytest.mark.parametrize(
    ("world_size", "stages"),
    [
        pytest.param(1, 1, marks=pytest.mark.dmlbench(world_size=1), id="ws1-stages1"),
        pytest.param(2, 2, marks=pytest.mark.dmlbench(world_size=2), id="ws2-stages2"),
        pytest.param(4, 2, marks=pytest.mark.dmlbench(world_size=4), id="ws4-stages2-replicas2"),
        pytest.param(4, 4, marks=pytest.mark.dmlbench(world_size=4), id="ws4-stages4"),
    ],
)
def test_pipeline_equals_unsplit_model(dist: Any, world_size: int, stages: int, micro_batches: int) -> None:
    check_pipeline_equals_unsplit(stages, micro_batches, momentum=0.9)


@pytest.mark.dmlbench(scaling=True)
def test_fp16_gradient_within_bound(dist: Any) -> None:
    check_fp16_gradient_error("cnn")


@pytest.mark.dmlbench(scaling=True)
def test_powersgd_gradient_is_a_projection(dist: Any) -> None:
    check_powersgd_projection("cnn")


@pytest.mark.dmlbench(scaling=True)
@pytest.mark.parametrize("name", ["fp16", "powersgd"])
def test_lossy_hooks_still_train(dist: Any, name: str) -> None:
    check_trains(name)


@pytest.mark.dmlbench(scaling=True)
@pytest.mark.parametrize("name", ["ddp", "allreduce", "bucketed", "ps"])
def test_batchnorm_buffers_follow_ddp_rule(dist: Any, name: str) -> None:
    check_batchnorm_buffers(name)


@pytest.mark.dmlbench(scaling=True)
def test_shards_cover_global_batch_once(dist: Any) -> None:
    check_shards_cover_global_batch()


# ------------------------------------------------------------------------------------ negative controls
# Pinned to two ranks: on one rank a missing all-reduce or a missing division changes nothing.
@pytest.mark.parametrize("world_size", pinned(2))
@pytest.mark.parametrize("fault", sorted(FAULTY))
def test_negative_control_faulty_strategy_is_caught(dist: Any, world_size: int, fault: str) -> None:
    strategy = FAULTY[fault](make_model("mlp"))
    if fault == "drop_last_bucket":
        assert len(strategy.buckets) > 1, "the control needs several buckets"  # type: ignore[attr-defined]
    with pytest.raises(AssertionError, match=FAULT_FAILURES[fault]):
        check_against(strategy, "mlp")


@pytest.mark.parametrize("world_size", pinned(2))
def test_negative_control_missing_buffer_broadcast_is_caught(dist: Any, world_size: int) -> None:
    with pytest.raises(AssertionError, match="BatchNorm buffers"):
        check_batchnorm_buffers("allreduce", broadcast_buffers=False)


# -------------------------------------------------------------------------------------------- DeepSpeed
# DeepSpeed is optional; its ZeRO stages reduce float32 (stage 0 refuses float64 gradients), so these cases
# run in float32 with float32 tolerances.
needs_deepspeed = pytest.mark.skipif(
    importlib.util.find_spec("deepspeed") is None,
    reason="DeepSpeed is not installed: pip install 'pytest-dmlbench[deepspeed]'",
)
ZERO_STAGES = [pytest.param(stage, id=f"zero{stage}") for stage in (0, 1, 2)]


@needs_deepspeed
@pytest.mark.dmlbench(scaling=True, timeout=300)
@pytest.mark.dmlbench_smoke("model_name")
@pytest.mark.parametrize("momentum", MOMENTA)
@pytest.mark.parametrize("zero_stage", ZERO_STAGES)
@pytest.mark.parametrize("model_name", ["mlp", "cnn"])
def test_deepspeed_matches_single_process_reference(dist: Any, model_name: str, zero_stage: int,
                                                    momentum: float) -> None:
    """ZeRO 0-2 with plain SGD equals single-process SGD on the global batch."""
    check_strategy_matches_reference("deepspeed", model_name, torch.float32, momentum, zero_stage=zero_stage)


@needs_deepspeed
@pytest.mark.dmlbench(timeout=300)
@pytest.mark.parametrize("world_size", pinned(2))
@pytest.mark.parametrize("zero_stage", ZERO_STAGES)
def test_negative_control_deepspeed_without_communication_is_caught(dist: Any, world_size: int,
                                                                    zero_stage: int) -> None:
    """The same check on DeepSpeed's engine with every communication skipped (its twin) must fail."""
    strategy = build("deepspeed", make_model("mlp", torch.float32), lr=LR, zero_stage=zero_stage, communicate=False)
    with pytest.raises(AssertionError, match=DRIFT_APART):
        check_against(strategy, "mlp", torch.float32)
