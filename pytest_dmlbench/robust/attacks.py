"""Model-poisoning attacks: the rows the f Byzantine ranks send, computed from the honest rows.

mu and sigma are the coordinate-wise mean and sample standard deviation (ddof=1) of the honest rows.
"""

from __future__ import annotations

import math
from statistics import NormalDist

import torch
from torch import Tensor


def _repeat(row: Tensor, f: int) -> Tensor:
    return row.unsqueeze(0).repeat(f, 1)


def zero(honest: Tensor, *, f: int) -> Tensor:
    """Rows of zeros."""
    return honest.new_zeros((f, honest.shape[1]))


def sign_flip(honest: Tensor, *, f: int, own: Tensor | None = None) -> Tensor:
    """-mu; with ``own`` (the attackers' own ``(f, d)`` gradients) each attacker sends its own negated."""
    if own is None:
        return _repeat(-honest.mean(dim=0), f)
    if own.shape != (f, honest.shape[1]):
        raise ValueError(f"sign_flip: own must have shape {(f, honest.shape[1])}, got {tuple(own.shape)}")
    return -own.to(honest.dtype)


def ipm(honest: Tensor, *, f: int, eps: float = 0.1) -> Tensor:
    """Inner-product manipulation -eps * mu (Xie, Koyejo and Gupta, "Fall of empires", UAI 2020)."""
    return _repeat(-eps * honest.mean(dim=0), f)


def alie_z(n: int, f: int) -> float:
    """Baruch et al.'s z: s = floor(n/2 + 1) - f supporters needed, z = Phi^-1((n - s) / n)."""
    supporters = math.floor(n / 2 + 1) - f
    p = (n - supporters) / n
    if not 0 < p < 1:
        raise ValueError(f"alie: z is undefined for n={n}, f={f} (needs 0 < (n - s)/n < 1); pass z=")
    return NormalDist().inv_cdf(p)


def alie(honest: Tensor, *, f: int, z: float | None = None) -> Tensor:
    """A little is enough: mu - z * sigma, z from the paper's formula for n = honest + f unless given
    (Baruch, Baruch and Goldberg, NeurIPS 2019). Needs at least two honest rows for sigma.
    """
    if honest.shape[0] < 2:
        raise ValueError(f"alie needs at least 2 honest rows to estimate sigma, got {honest.shape[0]}")
    factor = alie_z(honest.shape[0] + f, f) if z is None else z
    return _repeat(honest.mean(dim=0) - factor * honest.std(dim=0, correction=1), f)


def mean_shift(honest: Tensor, *, f: int, delta: float = 1.0) -> Tensor:
    """mu + delta in every coordinate."""
    return _repeat(honest.mean(dim=0) + delta, f)


def gaussian(
    honest: Tensor,
    *,
    f: int,
    scale: float = 1.0,
    seed: int | None = 0,
    generator: torch.Generator | None = None,
) -> Tensor:
    """Samples of N(mu, scale^2 I); deterministic from ``seed`` unless a ``generator`` is passed."""
    if generator is None:
        generator = torch.Generator(device=honest.device)
        if seed is not None:
            generator.manual_seed(seed)
    noise = torch.randn((f, honest.shape[1]), generator=generator, dtype=honest.dtype, device=honest.device)
    return honest.mean(dim=0) + scale * noise


def mimic(honest: Tensor, *, f: int, k: int = 0) -> Tensor:
    """Copies of honest row k."""
    if not 0 <= k < honest.shape[0]:
        raise ValueError(f"mimic: k must index an honest row (0 <= k < {honest.shape[0]}), got k={k}")
    return _repeat(honest[k], f)


def inf(honest: Tensor, *, f: int) -> Tensor:
    """Rows of +inf."""
    return honest.new_full((f, honest.shape[1]), math.inf)


def nan(honest: Tensor, *, f: int) -> Tensor:
    """Rows of NaN."""
    return honest.new_full((f, honest.shape[1]), math.nan)
