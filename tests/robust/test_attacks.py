"""The attack rows follow the reference table."""

from __future__ import annotations

import math
from typing import Any

import pytest
import torch

from pytest_dmlbench.robust import ATTACKS, attack
from pytest_dmlbench.robust.attacks import alie_z

HONEST = torch.tensor([[1.0, 2.0, -1.0], [3.0, 2.0, 1.0], [2.0, 5.0, 0.0]], dtype=torch.float64)
MU = HONEST.mean(dim=0)
SIGMA = HONEST.std(dim=0, correction=1)


@pytest.mark.parametrize("name", list(ATTACKS))
@pytest.mark.parametrize("f", [0, 1, 3])
def test_shape_dtype_and_honest_rows_untouched(name: str, f: int) -> None:
    before = HONEST.clone()
    rows = attack(name, HONEST, f=f)
    assert rows.shape == (f, 3) and rows.dtype == HONEST.dtype
    assert torch.equal(HONEST, before)


@pytest.mark.parametrize(
    ("name", "params", "expected"),
    [
        ("zero", {}, torch.zeros(3, dtype=torch.float64)),
        ("sign_flip", {}, -MU),
        ("ipm", {}, -0.1 * MU),
        ("ipm", {"eps": 2.0}, -2.0 * MU),
        ("alie", {"z": 1.5}, MU - 1.5 * SIGMA),
        ("mean_shift", {"delta": 4.0}, MU + 4.0),
        ("mimic", {"k": 2}, HONEST[2]),
    ],
)
def test_rows_follow_the_definition(name: str, params: dict[str, Any], expected: torch.Tensor) -> None:
    rows = attack(name, HONEST, f=2, **params)
    assert torch.allclose(rows, expected.expand(2, -1))


def test_sign_flip_of_own_gradients() -> None:
    own = torch.arange(6.0, dtype=torch.float64).reshape(2, 3)
    assert torch.equal(attack("sign_flip", HONEST, f=2, own=own), -own)


def test_alie_z_follows_baruch_et_al() -> None:
    # the paper's example: n = 50, f = 24 -> s = 2, z = Phi^-1(48/50) ~ 1.75
    assert alie_z(50, 24) == pytest.approx(1.7507, abs=1e-4)
    rows = attack("alie", HONEST, f=2)  # n = 5: s = 1, z = Phi^-1(0.8)
    assert torch.allclose(rows[0], MU - alie_z(5, 2) * SIGMA)
    assert alie_z(5, 2) == pytest.approx(0.8416, abs=1e-4)


def test_gaussian_is_seeded_and_centred_on_mu() -> None:
    many = torch.cat([HONEST] * 200)  # same mu
    a = attack("gaussian", many, f=4000 // 4, scale=0.5, seed=3)
    assert torch.equal(a, attack("gaussian", many, f=1000, scale=0.5, seed=3))
    assert not torch.equal(a, attack("gaussian", many, f=1000, scale=0.5, seed=4))
    assert torch.allclose(a.mean(dim=0), MU, atol=0.06)
    assert torch.allclose(a.std(dim=0), torch.full((3,), 0.5, dtype=torch.float64), atol=0.05)
    g = torch.Generator().manual_seed(9)
    assert torch.equal(attack("gaussian", HONEST, f=2, generator=g),
                       attack("gaussian", HONEST, f=2, generator=torch.Generator().manual_seed(9)))


def test_inf_and_nan_rows() -> None:
    assert bool(torch.isinf(attack("inf", HONEST, f=2)).all())
    assert bool(torch.isnan(attack("nan", HONEST, f=2)).all())
    assert not math.isnan(float(attack("zero", HONEST, f=1).sum()))


def test_alie_needs_two_honest_rows() -> None:
    with pytest.raises(ValueError, match="at least 2 honest rows"):
        attack("alie", HONEST[:1], f=1)
