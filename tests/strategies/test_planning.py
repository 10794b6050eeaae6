"""Pure planning logic of the strategies: bucket plans, pipeline cuts, the registry outside a world."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st
from torch import nn

from pytest_dmlbench.errors import ConfigError
from pytest_dmlbench.measure import comm
from pytest_dmlbench.strategies import available, build
from pytest_dmlbench.strategies.bucketed import plan_buckets
from pytest_dmlbench.strategies.pipeline import balance, split_stages


def test_buckets_respect_the_cap_and_the_order() -> None:
    plan = plan_buckets([4, 4, 4, 10, 2], ["f"] * 5, bucket_bytes=8)
    assert plan == [[0, 1], [2], [3], [4]]


def test_buckets_never_mix_dtypes() -> None:
    assert plan_buckets([4, 4, 4], ["f32", "f64", "f64"], bucket_bytes=100) == [[0], [1, 2]]


@given(
    sizes=st.lists(st.integers(1, 50), min_size=1, max_size=30),
    cap=st.integers(1, 120),
)
def test_bucket_plan_is_a_partition_in_order(sizes: list[int], cap: int) -> None:
    plan = plan_buckets(sizes, ["f"] * len(sizes), cap)
    assert [i for bucket in plan for i in bucket] == list(range(len(sizes)))
    for bucket in plan:
        assert len(bucket) == 1 or sum(sizes[i] for i in bucket) <= cap


def test_bucket_size_must_be_positive() -> None:
    with pytest.raises(ConfigError, match="bucket size must be > 0"):
        plan_buckets([1], ["f"], 0)


@given(
    sizes=st.lists(st.integers(0, 100), min_size=1, max_size=12),
    stages=st.integers(1, 12),
)
def test_pipeline_cut_is_consecutive_and_non_empty(sizes: list[int], stages: int) -> None:
    layers: list[nn.Module] = [nn.Linear(1, n) if n else nn.ReLU() for n in sizes]
    if stages > len(layers):
        with pytest.raises(ConfigError, match="use fewer stages"):
            balance(layers, stages)
        return
    parts = balance(layers, stages)
    assert len(parts) == stages and all(parts)
    assert [layer for part in parts for layer in part] == layers


def test_pipeline_cut_balances_parameters() -> None:
    layers: list[nn.Module] = [nn.Linear(10, 10) for _ in range(4)]
    assert [len(part) for part in balance(layers, 2)] == [2, 2]


def test_split_stages_shares_parameters_with_the_model() -> None:
    model = nn.Sequential(nn.Linear(2, 3), nn.ReLU(), nn.Linear(3, 1))
    stages = split_stages(model, 2)
    x = torch.randn(4, 2)
    assert torch.equal(stages[1](stages[0](x)), model(x))
    assert {id(p) for s in stages for p in s.parameters()} == {id(p) for p in model.parameters()}


def test_split_stages_uses_pipeline_stages_method() -> None:
    class Custom(nn.Module):
        def pipeline_stages(self, n: int) -> list[nn.Module]:
            return [nn.Identity() for _ in range(n)]

    assert len(split_stages(Custom(), 3)) == 3


def test_unsplittable_model_is_a_clear_error() -> None:
    with pytest.raises(ConfigError, match=r"pass an nn\.Sequential or give the model a pipeline_stages"):
        split_stages(nn.Linear(2, 2), 2)


def test_registry_lists_every_strategy_name() -> None:
    expected = {"ddp", "allreduce", "bucketed", "ps", "local_sgd", "fp16", "powersgd", "pipeline", "robust"}
    assert expected <= set(available())


def test_unknown_strategy_names_the_choices() -> None:
    with pytest.raises(ConfigError, match=r"unknown strategy 'byteps'; available: allreduce, bucketed"):
        build("byteps", nn.Linear(1, 1), lr=0.1)


@pytest.mark.parametrize("name", ["ddp", "allreduce", "bucketed", "ps", "local_sgd", "pipeline"])
def test_building_outside_a_process_group_is_a_clear_error(name: str) -> None:
    with pytest.raises(ConfigError, match="needs an initialised default process group"):
        build(name, nn.Sequential(nn.Linear(1, 1)), lr=0.1)


def test_byte_counts_nest_and_stop_at_the_block_end(world1: None, monkeypatch: pytest.MonkeyPatch) -> None:
    """Bytes issued out of Python's sight (``account``) reach every active counter, none after its block;
    a one-rank group hands nothing over, a two-rank one does (``account`` applies the same rule)."""

    class TwoRanks:  # only its size is asked for: dist.get_world_size(group)
        pass

    import torch.distributed as dist

    original_size = dist.get_world_size
    monkeypatch.setattr(dist, "get_world_size",
                        lambda group=None: 2 if isinstance(group, TwoRanks) else original_size(group))
    with comm.instrument_collectives() as outer:
        comm.account("all_reduce", 8, TwoRanks())
        with comm.instrument_collectives() as inner:
            comm.account("broadcast", 4, TwoRanks())
            comm.account("broadcast", 100)  # the one-rank world: nothing leaves the process
    comm.account("all_reduce", 100, TwoRanks())
    assert (outer.bytes, outer.bytes_by_op) == (12, {"all_reduce": 8, "broadcast": 4})
    assert (inner.bytes, inner.bytes_by_op) == (4, {"broadcast": 4})


def test_nbytes_counts_element_sizes() -> None:
    assert comm.nbytes(torch.zeros(3, dtype=torch.float64)) == 24
    assert comm.nbytes([torch.zeros(2, dtype=torch.float16), torch.zeros(1)]) == 8


def test_strategy_from_a_missing_module_is_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    from pytest_dmlbench.strategies import base

    monkeypatch.setitem(base._LAZY_MODULES, "imaginary", "pytest_dmlbench.imaginary_strategy")
    with pytest.raises(ConfigError, match=r"provided by pytest_dmlbench\.imaginary_strategy, which is not installed"):
        build("imaginary", nn.Linear(1, 1), lr=0.1)


def test_set_interceptor_returns_the_previous_one() -> None:
    def first(op: str, size: int, call: object) -> None:
        return None

    assert comm.set_interceptor(first) is None
    assert comm.set_interceptor(None) is first
