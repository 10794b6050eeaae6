"""The ``robust`` strategy on a real one-rank gloo group: registration, equivalence with plain SGD,
Byzantine rows, non-finite attackers, the integrity layer and configuration errors.

Multi-rank behaviour (bit-identical aggregation, accuracy under attack, bytes per step) is checked in
``bench_cases/test_robust_training.py``.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from pytest_dmlbench.data import synthetic_classification
from pytest_dmlbench.errors import ConfigError
from pytest_dmlbench.robust import aggregate
from pytest_dmlbench.robust.strategy import RobustStrategy, flip_sign_bit_of_largest
from pytest_dmlbench.strategies import build
from pytest_dmlbench.training import models
from pytest_dmlbench.training.reference import flat, reference_sgd

BATCH = synthetic_classification(24, (8,), 4, seed=3)


pytestmark = pytest.mark.usefixtures("world1")


def model() -> nn.Module:
    return models.tiny_mlp(8, 16, 4, seed=0).double()


def strategy(**options: Any) -> RobustStrategy:
    built = build("robust", model(), lr=0.1, **options)
    assert isinstance(built, RobustStrategy)
    return built


def client_rows(module: nn.Module, clients: int) -> torch.Tensor:
    """Each client's flat gradient, computed independently of the strategy."""
    rows = []
    for xs, ys in zip(BATCH[0].double().chunk(clients), BATCH[1].chunk(clients), strict=True):
        module.zero_grad(set_to_none=True)
        F.cross_entropy(module(xs), ys).backward()  # type: ignore[no-untyped-call]  # untyped in torch
        rows.append(flat(p.grad for p in module.parameters() if p.grad is not None))
    return torch.stack(rows)


def step(s: RobustStrategy) -> float:
    return s.step(BATCH[0].double(), BATCH[1], F.cross_entropy)


def test_registered_under_robust() -> None:
    assert type(build("robust", model(), lr=0.1)) is RobustStrategy


def test_mean_without_attack_is_plain_sgd() -> None:
    s = strategy(aggregator="mean", momentum=0.0)
    reference = model()
    next(reference_sgd(reference, [(BATCH[0].double(), BATCH[1])], F.cross_entropy, lr=0.1))
    step(s)
    assert torch.equal(flat(s.model.parameters()), flat(reference.parameters()))


def test_mean_over_clients_matches_the_whole_batch_and_detects_a_wrong_factor() -> None:
    s = strategy(aggregator="mean", clients_per_rank=3)
    rows = client_rows(model(), 3)
    step(s)
    assert s.last_aggregate is not None
    torch.testing.assert_close(s.last_aggregate, rows.mean(dim=0), rtol=1e-12, atol=1e-14)
    with pytest.raises(AssertionError, match="not close"):  # negative control: the sum is not the mean
        torch.testing.assert_close(s.last_aggregate, rows.sum(dim=0), rtol=1e-12, atol=1e-14)


def test_byzantine_rows_are_replaced_by_the_attack_on_the_honest_rows() -> None:
    s = strategy(aggregator="median", f=1, attack="ipm", byzantine_ranks=[2], clients_per_rank=4,
                 attack_params={"eps": 3.0})
    rows = client_rows(model(), 4)
    honest = rows[[0, 1, 3]]
    expected_stack = rows.clone()
    expected_stack[2] = -3.0 * honest.mean(dim=0)
    step(s)
    assert s.last_aggregate is not None
    assert torch.equal(s.last_aggregate, aggregate("median", expected_stack, f=1))
    assert not torch.equal(s.last_aggregate, aggregate("median", rows, f=1))


@pytest.mark.parametrize("attack", ["inf", "nan"])
def test_non_finite_attackers_within_f_leave_the_model_finite(attack: str) -> None:
    robust = strategy(aggregator="median", f=1, attack=attack, clients_per_rank=4)
    mean = strategy(aggregator="mean", f=1, attack=attack, clients_per_rank=4)
    for _ in range(3):
        step(robust)
        step(mean)
    assert torch.isfinite(flat(robust.model.parameters())).all()
    assert not torch.isfinite(flat(mean.model.parameters())).all()  # control: the mean is poisoned


def test_integrity_rejects_the_tampered_client_and_logs_every_step() -> None:
    s = strategy(aggregator="mean", clients_per_rank=3, integrity=True, session_secret=b"0123456789abcdef",
                 tamper_ranks=[1])
    rows = client_rows(model(), 3)
    for _ in range(3):
        step(s)
    assert s.rejected_updates == 3
    assert s.verifier is not None and dict(s.verifier.rejections) == {1: 3}
    assert len(s.model_log.entries) == 3 and s.model_log.verify()
    fresh = strategy(aggregator="mean", clients_per_rank=3, integrity=True, session_secret=b"0123456789abcdef",
                     tamper_ranks=[1])
    step(fresh)
    assert fresh.last_aggregate is not None
    assert torch.equal(fresh.last_aggregate, rows[[0, 2]].mean(dim=0))  # the tampered row was dropped


def test_without_integrity_the_tampered_row_is_aggregated() -> None:
    s = strategy(aggregator="mean", clients_per_rank=3, tamper_ranks=[1])
    rows = client_rows(model(), 3)
    step(s)
    tampered = rows.clone()
    flip_sign_bit_of_largest(tampered[1])
    assert s.rejected_updates == 0 and s.model_log.entries == []
    assert s.last_aggregate is not None
    assert torch.equal(s.last_aggregate, tampered.mean(dim=0))
    assert not torch.equal(s.last_aggregate, rows.mean(dim=0))


def test_flip_sign_bit_negates_the_largest_entry_only() -> None:
    row = torch.tensor([0.5, -3.0, 1.0])
    flip_sign_bit_of_largest(row)
    assert row.tolist() == [0.5, 3.0, 1.0]


def test_twin_sends_nothing_and_keeps_the_options() -> None:
    s = strategy(aggregator="trimmed_mean", f=1, clients_per_rank=4)
    twin = s.twin()
    assert isinstance(twin, RobustStrategy) and not twin.communicate
    assert (twin.aggregator, twin.f, twin.clients_per_rank) == ("trimmed_mean", 1, 4)
    step(twin)
    assert twin.comm_bytes_last_step == 0


def test_momentum_is_applied() -> None:
    s = strategy(aggregator="mean", momentum=0.9)
    reference = model()
    batches = [(BATCH[0].double(), BATCH[1])] * 3
    for _ in reference_sgd(reference, batches, F.cross_entropy, lr=0.1, momentum=0.9):
        step(s)
    assert torch.equal(flat(s.model.parameters()), flat(reference.parameters()))
    assert not torch.equal(flat(s.model.parameters()), flat(copy.deepcopy(model()).parameters()))


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"aggregator": "avg"}, "unknown aggregator 'avg'"),
        ({"attack": "label_flip"}, "data attacks such as label_flip"),
        ({"f": 4, "clients_per_rank": 4}, "f must be an int in \\[0, n\\)"),
        ({"clients_per_rank": 0}, "clients_per_rank must be an int >= 1"),
        ({"byzantine_ranks": [0, 0], "clients_per_rank": 2, "attack": "zero"}, "distinct row indices"),
        ({"tamper_ranks": [5]}, "tamper_ranks must be distinct row indices in \\[0, 1\\)"),
        ({"integrity": True, "session_secret": b"short"}, "at least 16 bytes"),
    ],
)
def test_bad_options_are_clear_errors(options: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        strategy(**options)


def test_shard_that_does_not_split_into_clients_is_a_clear_error() -> None:
    s = strategy(clients_per_rank=5)
    with pytest.raises(ConfigError, match="multiple of clients_per_rank=5"):
        step(s)
