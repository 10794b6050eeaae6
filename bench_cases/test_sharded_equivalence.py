"""FSDP2 (``fsdp``) and tensor parallelism (``tensor_parallel``) on real process groups.

Held to the float64 equivalence of the other strategies: after every step the whole parameters (gathered
from the shards) equal single-process SGD on the global batch, at world sizes 2 and 4; a negative control
per strategy (FSDP skipping its gradient reduce-scatter, TP leaving out the all-reduce of the row-wise
partial outputs) must fail that check. Their bytes per step match the formulas in the strategies'
docstrings, routed through :mod:`pytest_dmlbench.measure.comm`, and their twins send nothing.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from bench_cases.test_equivalence import GLOBAL_BATCH, LR, MOMENTA, STEPS, make_batches, make_model, pinned
from bench_cases.test_strategy_accounting import check_bytes_agree, one_step, train_once
from pytest_dmlbench.errors import ConfigError
from pytest_dmlbench.strategies import build
from pytest_dmlbench.strategies.sharded import ShardedStrategy, sharding_support
from pytest_dmlbench.training import models
from pytest_dmlbench.training.reference import (
    assert_close_on_all_ranks,
    assert_identical_across_ranks,
    batch_for,
    flat,
    raise_on_all_ranks,
    reference_sgd,
    tolerances,
)

# The correctness suite CI runs: pytest --dmlbench --world-size 2 -m correctness. The strategy modules are
# imported where used: on a torch without FSDP2/DTensor importing them raises, and these cases are skipped.
pytestmark = [pytest.mark.correctness,
              pytest.mark.skipif(sharding_support() is not None, reason=f"{sharding_support()}")]

RESHARD = [pytest.param(True, id="reshard"), pytest.param(False, id="keep")]
OFF_THE_REFERENCE = r"parameters vs single-process reference after step 1: \d+ of \d+ values differ beyond"


# ----------------------------------------------------------------------------------------------- checks
def check_sharded_matches_reference(strategy: ShardedStrategy, reference: nn.Module, model_name: str,
                                    dtype: torch.dtype = torch.float64, n: int = GLOBAL_BATCH,
                                    steps: int = STEPS) -> None:
    """``steps`` steps: the gathered parameters are bit-identical on every rank and equal single-process SGD
    on the global batch (``n`` samples); where every rank computes the whole batch (``data_world_size == 1``),
    the loss too."""
    rtol, atol = tolerances(dtype)
    batches = make_batches(model_name, dtype, steps=steps, n=n)
    expected_losses = reference_sgd(reference, batches, F.cross_entropy, lr=strategy.lr, momentum=strategy.momentum)
    for step, batch in enumerate(batches, start=1):
        loss = strategy.step(*batch_for(strategy, batch), F.cross_entropy)
        expected_loss = next(expected_losses)
        if strategy.data_world_size == 1:
            assert_close_on_all_ranks(torch.tensor([loss], dtype=dtype), torch.tensor([expected_loss], dtype=dtype),
                                      rtol=rtol, atol=atol, what=f"{strategy.name} loss at step {step}")
        params = flat(strategy.full_parameters())
        assert_identical_across_ranks(params, what=f"{strategy.name} parameters after step {step}")
        assert_close_on_all_ranks(params, flat(reference.parameters()), rtol=rtol, atol=atol,
                                  what=f"{strategy.name} parameters vs single-process reference after step {step}")


def check_against_reference(strategy: ShardedStrategy, model_name: str, n: int = GLOBAL_BATCH,
                            steps: int = STEPS) -> None:
    """An already-built strategy (e.g. a faulty one) against the reference from its initial parameters."""
    reference = make_model(model_name)
    reference.load_state_dict(strategy.unsharded_model().state_dict())
    check_sharded_matches_reference(strategy, reference, model_name, n=n, steps=steps)


def check_strategy(name: str, model_name: str, momentum: float, n: int = GLOBAL_BATCH, steps: int = STEPS,
                   **options: Any) -> None:
    """``name`` built on ``model_name`` against single-process SGD: ``steps`` steps on global batches of ``n``."""
    strategy = build(name, make_model(model_name), lr=LR, momentum=momentum, **options)
    assert isinstance(strategy, ShardedStrategy)
    check_against_reference(strategy, model_name, n, steps)


# ------------------------------------------------------------------------------------ faulty strategies
def skip_reduce_scatter_fsdp(model: nn.Module) -> ShardedStrategy:
    """Broken on purpose: each rank keeps its own chunk of its own gradient (no reduce-scatter)."""
    from pytest_dmlbench.strategies.fsdp import FSDPStrategy, LocalReduceScatter

    class SkipReduceScatterFSDP(FSDPStrategy):
        def _reduce_scatter(self) -> LocalReduceScatter:
            return LocalReduceScatter()

    return SkipReduceScatterFSDP(model, lr=LR)


def missing_all_reduce_tp(model: nn.Module) -> ShardedStrategy:
    """Broken on purpose: the row-wise layer's partial outputs are used unsummed (no all-reduce)."""
    from torch.distributed.tensor import Partial
    from torch.distributed.tensor.parallel import ColwiseParallel, ParallelStyle, RowwiseParallel

    from pytest_dmlbench.strategies.tensor_parallel import TensorParallelStrategy

    class MissingAllReduceTP(TensorParallelStrategy):
        def parallel_plan(self) -> dict[str, ParallelStyle]:
            plan: dict[str, ParallelStyle] = {}
            for first, second in self.pairs:
                plan[first], plan[second] = ColwiseParallel(), RowwiseParallel(output_layouts=Partial())
            return plan

    return MissingAllReduceTP(model, lr=LR)


FAULTY: dict[str, Callable[[nn.Module], ShardedStrategy]] = {
    "fsdp_skips_reduce_scatter": skip_reduce_scatter_fsdp,
    "tp_missing_all_reduce": missing_all_reduce_tp,
}
# FSDP's gathered parameters are the same on every rank whatever the shards hold, so only the reference
# sees a missing reduce-scatter; TP without its all-reduce computes every rank's loss on a partial sum.
FAULT_FAILURES = {
    "fsdp_skips_reduce_scatter": OFF_THE_REFERENCE,
    "tp_missing_all_reduce": r"tensor_parallel loss at step 1: 1 of 1 values differ beyond",
}


# ----------------------------------------------------------------------------------------- equivalence
@pytest.mark.dmlbench_smoke("model_name")
@pytest.mark.parametrize("world_size", pinned(2, 4))
@pytest.mark.parametrize("reshard_after_forward", RESHARD)
@pytest.mark.parametrize("model_name", ["mlp", "cnn", "transformer"])
def test_fsdp_matches_single_process_reference_float64(dist: Any, world_size: int, model_name: str,
                                                       reshard_after_forward: bool) -> None:
    check_strategy("fsdp", model_name, 0.9, reshard_after_forward=reshard_after_forward)


@pytest.mark.parametrize("world_size", pinned(2, 4))
def test_fsdp_without_momentum_matches_single_process_reference_float64(dist: Any, world_size: int) -> None:
    check_strategy("fsdp", "mlp", 0.0)


@pytest.mark.dmlbench_smoke("model_name")
@pytest.mark.parametrize("world_size", pinned(2, 4))
@pytest.mark.parametrize("momentum", MOMENTA)
@pytest.mark.parametrize("model_name", ["mlp", "cnn"])
def test_tensor_parallel_matches_single_process_reference_float64(dist: Any, world_size: int, model_name: str,
                                                                  momentum: float) -> None:
    """Every rank sees the whole global batch; on the cnn the pair's input needs a gradient (backward
    all-reduce)."""
    check_strategy("tensor_parallel", model_name, momentum)


@pytest.mark.parametrize("world_size", pinned(4))
def test_tensor_parallel_refuses_a_width_the_world_does_not_divide(dist: Any, world_size: int) -> None:
    with pytest.raises(ConfigError, match=r"hidden width 30 of layer '0' is not divisible by the world size 4"):
        build("tensor_parallel", models.tiny_mlp(16, 30, 10, seed=0), lr=LR)


# ------------------------------------------------------------------------------------ negative controls
@pytest.mark.parametrize("world_size", pinned(2))
@pytest.mark.parametrize("fault", sorted(FAULTY))
def test_negative_control_faulty_sharded_strategy_is_caught(dist: Any, world_size: int, fault: str) -> None:
    strategy = FAULTY[fault](make_model("mlp"))
    with pytest.raises(AssertionError, match=FAULT_FAILURES[fault]):
        check_against_reference(strategy, "mlp")


# ------------------------------------------------------------------------------------------------ bytes
def padded_shard_bytes(unit: nn.Module, world_size: int) -> int:
    """Bytes of this rank's padded dim-0 shards of ``unit``'s parameters (FSDP2's all-gather input)."""
    return sum(math.ceil(p.shape[0] / world_size) * (p.numel() // p.shape[0]) * p.element_size()
               for p in unit.parameters())


def fsdp_bytes(model: nn.Module, world_size: int, reshard_after_forward: bool) -> dict[str, int]:
    """Documented bytes per step of ``fsdp`` (pytest_dmlbench/strategies/fsdp.py) on an unsharded model."""
    from pytest_dmlbench.strategies.fsdp import fsdp_units

    shard = sum(padded_shard_bytes(unit, world_size) for unit in fsdp_units(model))
    gathers = 2 if reshard_after_forward else 1
    return {"all_gather_single": gathers * shard, "reduce_scatter_single": world_size * shard}


def tensor_parallel_bytes(model: nn.Module, batch: int, input_needs_grad: bool) -> dict[str, int]:
    """Documented bytes per step of ``tensor_parallel``: per pair, its output all-reduced in the forward
    and, when its input needs a gradient, that gradient in the backward."""
    from pytest_dmlbench.strategies.tensor_parallel import linear_pairs

    modules = dict(model.named_modules())
    total = 0
    for first, second in linear_pairs(model):
        layer_in, layer_out = modules[first], modules[second]
        assert isinstance(layer_in, nn.Linear) and isinstance(layer_out, nn.Linear)
        itemsize = layer_out.weight.element_size()
        total += batch * layer_out.out_features * itemsize
        if input_needs_grad:
            total += batch * layer_in.in_features * itemsize
    return {"all_reduce": total}


def check_sharded_accounting(name: str, model: nn.Module, expected: dict[str, int], **options: Any) -> None:
    """Three steps: interceptor, strategy and outer counter agree with the formula; the twin sends nothing."""
    strategy = build(name, model, lr=0.1, **options)
    for step in (1, 2, 3):
        totals: dict[str, int] = {}
        for op, size in one_step(strategy):
            totals[op] = totals.get(op, 0) + size
        error = None
        if totals != strategy.comm_bytes_by_op:
            error = f"{name}: interceptor saw {totals}, strategy counted {strategy.comm_bytes_by_op}"
        elif totals != expected:
            error = f"{name} step {step}: counted {totals}, documented {expected}"
        raise_on_all_ranks(error, what=f"{name} byte accounting")
    twin = strategy.twin()
    seen = one_step(twin)
    raise_on_all_ranks(f"{name} twin communicated {seen}" if seen or twin.comm_bytes_last_step else None,
                       what=f"{name} twin")


@pytest.mark.parametrize("world_size", pinned(2, 4))
@pytest.mark.parametrize("reshard_after_forward", RESHARD)
def test_fsdp_bytes_match_the_formula(dist: Any, world_size: int, reshard_after_forward: bool) -> None:
    model = models.tiny_mlp(16, 32, 10, seed=0)  # float32; Linear(32, 10) pads 10 rows to 4 x 3 at 4 ranks
    expected = fsdp_bytes(model, world_size, reshard_after_forward)
    check_sharded_accounting("fsdp", model, expected, reshard_after_forward=reshard_after_forward)


@pytest.mark.parametrize("world_size", pinned(2, 4))
def test_tensor_parallel_bytes_match_the_formula(dist: Any, world_size: int) -> None:
    model = models.tiny_mlp(16, 32, 10, seed=0)
    check_sharded_accounting("tensor_parallel", model, tensor_parallel_bytes(model, 8 * world_size, False))


@pytest.mark.parametrize("world_size", pinned(2))
def test_tensor_parallel_bytes_with_a_backward_all_reduce(dist: Any, world_size: int) -> None:
    """On the cnn the pair follows the convolutions, so its input gradient is all-reduced too (not by the
    twin)."""
    model = models.small_cnn(10, channels=(4, 8), hidden=16, seed=0)
    batch = 4
    strategy = build("tensor_parallel", model, lr=0.1)
    assert isinstance(strategy, ShardedStrategy)
    images = make_batches("cnn", torch.float32, steps=1, n=batch)[0]
    expected = tensor_parallel_bytes(strategy.unsharded_model(), batch, True)
    strategy.step(*batch_for(strategy, images), F.cross_entropy)
    counted = strategy.comm_bytes_by_op
    error = None if counted == expected else f"counted {counted}, documented {expected}"
    raise_on_all_ranks(error, what="tensor_parallel cnn bytes")
    twin = strategy.twin()  # leaves out the backward all-reduce of the input gradient too
    twin.step(*batch_for(twin, images), F.cross_entropy)
    raise_on_all_ranks(f"twin sent {twin.comm_bytes_by_op}" if twin.comm_bytes_last_step else None,
                       what="tensor_parallel cnn twin")


@pytest.mark.parametrize("world_size", pinned(2))
@pytest.mark.parametrize("name", ["fsdp", "tensor_parallel"])
def test_sharded_strategy_and_runner_count_the_same_bytes(dist: Any, dmlbench: Any, world_size: int,
                                                          name: str) -> None:
    strategy = build(name, models.tiny_mlp(16, 32, 10, seed=0), lr=0.1)
    check_bytes_agree(strategy, train_once(dmlbench, strategy, (16,)))
