"""Synthetic data sets and the sharding convention."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from pytest_dmlbench.data import (
    shard,
    shard_bounds,
    synthetic_classification,
    synthetic_segmentation,
    token_sequences,
)
from pytest_dmlbench.errors import ConfigError


@given(world_size=st.integers(1, 16), per_rank=st.integers(0, 8))
def test_shards_cover_the_batch_exactly_once(world_size: int, per_rank: int) -> None:
    n = world_size * per_rank
    covered = torch.cat([shard(torch.arange(n), r, world_size) for r in range(world_size)])
    assert torch.equal(covered, torch.arange(n))
    assert [shard_bounds(n, r, world_size) for r in range(world_size)] == [
        (r * per_rank, (r + 1) * per_rank) for r in range(world_size)
    ]


def test_shard_of_a_tuple_keeps_pairs_together() -> None:
    x, y = torch.arange(12).reshape(6, 2), torch.arange(6)
    xs, ys = shard((x, y), 1, 3)
    assert torch.equal(xs, x[2:4]) and torch.equal(ys, y[2:4])


def test_uneven_batch_is_a_clear_error() -> None:
    with pytest.raises(ConfigError, match="global batch of 10 samples does not split into 4 equal shards"):
        shard(torch.arange(10), 0, 4)


@pytest.mark.parametrize(("rank", "world_size"), [(2, 2), (-1, 2), (0, 0)])
def test_bad_rank_or_world_is_a_clear_error(rank: int, world_size: int) -> None:
    with pytest.raises(ConfigError):
        shard_bounds(8, rank, world_size)


def test_tuple_of_different_lengths_is_an_error() -> None:
    with pytest.raises(ConfigError, match="same length"):
        shard((torch.zeros(4), torch.zeros(6)), 0, 2)


def test_classification_is_deterministic_and_uses_several_classes() -> None:
    x, y = synthetic_classification(256, (8,), 5, seed=1)
    x2, y2 = synthetic_classification(256, (8,), 5, seed=1)
    assert torch.equal(x, x2) and torch.equal(y, y2)
    assert x.shape == (256, 8) and x.dtype == torch.float32 and y.dtype == torch.int64
    assert len(torch.unique(y)) == 5
    assert not torch.equal(y, synthetic_classification(256, (8,), 5, seed=2)[1])


def test_classification_labels_are_learnable_by_a_linear_model() -> None:
    x, y = synthetic_classification(512, (8,), 3, seed=0)
    model = torch.nn.Linear(8, 3)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.5)
    for _ in range(200):
        optimizer.zero_grad()
        torch.nn.functional.cross_entropy(model(x), y).backward()  # type: ignore[no-untyped-call]  # untyped in torch
        optimizer.step()
    accuracy = (model(x).argmax(1) == y).float().mean().item()
    assert accuracy > 0.9


def test_segmentation_shapes_and_classes() -> None:
    x, y = synthetic_segmentation(4, channels=3, size=16, num_classes=3, seed=0)
    assert x.shape == (4, 3, 16, 16) and y.shape == (4, 16, 16)
    assert set(torch.unique(y).tolist()) == {0, 1, 2}


def test_token_sequences_shapes_and_range() -> None:
    tokens, y = token_sequences(64, seq_len=12, vocab_size=20, num_classes=2, seed=0)
    assert tokens.shape == (64, 12) and tokens.dtype == torch.int64
    assert int(tokens.min()) >= 0 and int(tokens.max()) < 20
    assert set(torch.unique(y).tolist()) == {0, 1}
