"""``fsdp`` and ``tensor_parallel``: registry, options, clear errors, which layers they take, and a
one-rank build (multi-rank equivalence and bytes: ``bench_cases/test_sharded_equivalence.py``)."""

from __future__ import annotations

import copy
from typing import Any

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from pytest_dmlbench.errors import ConfigError
from pytest_dmlbench.strategies import available, build, sharded
from pytest_dmlbench.strategies.base import factory_for
from pytest_dmlbench.strategies.options import option_names
from pytest_dmlbench.strategies.sharded import ShardedStrategy, sharding_support
from pytest_dmlbench.training import models
from pytest_dmlbench.training.reference import flat, reference_sgd

NAMES = ["fsdp", "tensor_parallel"]
# The strategy modules are imported inside the tests: on a torch without FSDP2/DTensor (the floor job's
# 2.3) importing them raises, and these tests are skipped.
pytestmark = pytest.mark.skipif(sharding_support() is not None, reason=f"{sharding_support()}")


def test_a_torch_without_the_pieces_is_named_in_the_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sharded, "_NEEDED", (("torch.distributed.fsdp", "fully_shard_v9"),))
    with pytest.raises(ConfigError, match=r"strategy 'fsdp' needs a newer torch .*fsdp\.fully_shard_v9"):
        sharded.require_sharding_support("fsdp")


def test_both_are_registered_under_their_names() -> None:
    from pytest_dmlbench.strategies.fsdp import FSDPStrategy
    from pytest_dmlbench.strategies.tensor_parallel import TensorParallelStrategy

    assert set(NAMES) <= set(available())
    assert factory_for("fsdp") is FSDPStrategy
    assert factory_for("tensor_parallel") is TensorParallelStrategy


def test_their_options_are_read_from_the_strategies() -> None:
    assert option_names("fsdp") == frozenset({"reshard_after_forward"})
    assert option_names("tensor_parallel") == frozenset()


@pytest.mark.parametrize("name", NAMES)
def test_building_outside_a_process_group_is_a_clear_error(name: str) -> None:
    with pytest.raises(ConfigError, match=f"strategy '{name}' needs an initialised default process group"):
        build(name, models.tiny_mlp(4, 8, 2), lr=0.1)


@pytest.mark.parametrize("value", ["yes", 1, None])
def test_reshard_after_forward_must_be_true_or_false(value: Any) -> None:
    with pytest.raises(ConfigError, match=r"fsdp: reshard_after_forward must be True or False, got "):
        build("fsdp", models.tiny_mlp(4, 8, 2), lr=0.1, reshard_after_forward=value)


@pytest.mark.parametrize("name", NAMES)
def test_an_option_the_strategy_does_not_take_is_refused(name: str) -> None:
    with pytest.raises(TypeError, match="unexpected keyword argument 'bucket_mb'"):
        build(name, models.tiny_mlp(4, 8, 2), lr=0.1, bucket_mb=1.0)


class Block(nn.Module):
    """A module whose children run in an order the listing does not show (no pairs taken from it)."""

    def __init__(self) -> None:
        super().__init__()
        self.a = nn.Linear(8, 8)
        self.b = nn.Linear(8, 8)
        self.mlp = nn.Sequential(nn.Linear(8, 16), nn.GELU(), nn.Dropout(0.0), nn.Linear(16, 8))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out: torch.Tensor = self.mlp(self.b(self.a(x)))
        return out


def test_linear_pairs_are_taken_in_sequentials_across_parameter_free_modules() -> None:
    from pytest_dmlbench.strategies.tensor_parallel import linear_pairs

    assert linear_pairs(models.tiny_mlp(16, 32, 10)) == [("0", "2")]
    three = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 8), nn.ReLU(), nn.Linear(8, 2))
    assert linear_pairs(three) == [("0", "2")]  # greedy from the front; the last layer stays replicated
    assert linear_pairs(nn.Sequential(Block(), nn.Linear(8, 2))) == [("0.mlp.0", "0.mlp.3")]
    assert linear_pairs(models.small_cnn(10, channels=(4, 8), hidden=16)) == [("7", "9")]


def test_a_layer_with_parameters_between_two_linears_breaks_the_pair() -> None:
    from pytest_dmlbench.strategies.tensor_parallel import linear_pairs

    assert linear_pairs(nn.Sequential(nn.Linear(4, 8), nn.LayerNorm(8), nn.Linear(8, 2))) == []


def test_fsdp_units_are_the_layers_inside_containers() -> None:
    from pytest_dmlbench.strategies.fsdp import fsdp_units

    inner = nn.Sequential(nn.Linear(8, 8), nn.LayerNorm(8))
    model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), inner, Block())
    assert fsdp_units(model) == [model[0], inner[0], inner[1], model[3]]


def test_tensor_parallel_needs_a_pair_of_linear_layers(world1: None) -> None:
    model = nn.Sequential(nn.Linear(4, 8), nn.LayerNorm(8), nn.Linear(8, 2))
    with pytest.raises(ConfigError, match=r"tensor_parallel: the model has no pair of nn\.Linear layers"):
        build("tensor_parallel", model, lr=0.1)


@pytest.mark.parametrize("name", NAMES)
def test_one_rank_equals_single_process_sgd_and_sends_nothing(world1: None, name: str) -> None:
    model = models.tiny_mlp(16, 32, 10, seed=0).double()
    reference = copy.deepcopy(model)
    strategy = build(name, model, lr=0.1, momentum=0.9)
    assert isinstance(strategy, ShardedStrategy)
    assert (strategy.data_rank, strategy.data_world_size) == (0, 1)
    batches = [(torch.randn(8, 16, dtype=torch.float64, generator=torch.Generator().manual_seed(step)),
                torch.arange(8) % 10) for step in range(3)]
    expected = reference_sgd(reference, batches, F.cross_entropy, lr=0.1, momentum=0.9)
    for inputs, targets in batches:
        loss = strategy.step(inputs, targets, F.cross_entropy)
        assert loss == pytest.approx(next(expected), rel=1e-12)
        torch.testing.assert_close(flat(strategy.full_parameters()), flat(reference.parameters()),
                                   rtol=1e-10, atol=1e-12)
        assert strategy.comm_bytes_last_step == 0
    twin = strategy.twin()  # built around an unsharded copy holding the current parameters
    assert isinstance(twin, type(strategy)) and not twin.communicate
    torch.testing.assert_close(flat(twin.full_parameters()), flat(reference.parameters()), rtol=0, atol=0)
