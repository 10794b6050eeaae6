"""Small published results: ByzFL's unit fixtures and Flower's Multi-Krum / Bulyan examples."""

from __future__ import annotations

import torch

from pytest_dmlbench.robust import aggregate

BYZFL_X = torch.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0], [7.0, 8.0, 9.0]])


def test_byzfl_fixture_median_and_trimmed_mean() -> None:
    assert torch.equal(aggregate("median", BYZFL_X, f=1), torch.tensor([4.0, 5.0, 6.0]))
    assert torch.equal(aggregate("trimmed_mean", BYZFL_X, f=1), torch.tensor([4.0, 5.0, 6.0]))


def test_byzfl_fixture_distinguishes_the_rules() -> None:
    # negative control: the fixture does tell rules apart (Krum picks an extreme row on a tie)
    assert torch.equal(aggregate("krum", BYZFL_X, f=0), BYZFL_X[0])
    assert not torch.equal(aggregate("krum", BYZFL_X, f=0), torch.tensor([4.0, 5.0, 6.0]))


def test_flower_multi_krum_keeps_the_two_closest() -> None:
    x = torch.tensor([[0.2], [0.5], [1.0]])
    assert torch.allclose(aggregate("multi_krum", x, f=1, m=2), torch.tensor([0.35]))
    # negative control: keeping all three is the mean, not 0.35
    assert not torch.allclose(aggregate("multi_krum", x, f=0, m=3), torch.tensor([0.35]))


def test_flower_bulyan_with_f0_is_the_mean() -> None:
    x = torch.tensor([[0.2, 1.0], [0.5, -2.0], [1.0, 4.0], [3.0, 0.0]])
    assert torch.allclose(aggregate("bulyan", x, f=0), x.mean(dim=0))


def test_median_of_even_n_averages_the_two_middle_values() -> None:
    x = torch.tensor([[1.0], [2.0], [3.0], [10.0]])
    assert aggregate("median", x, f=1).item() == 2.5
    assert torch.median(x, dim=0).values.item() == 2.0  # the convention torch.median does not follow
