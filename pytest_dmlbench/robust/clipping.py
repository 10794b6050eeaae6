"""Norm clipping: centered clipping (an aggregation rule) and per-row clipping (a pre-aggregation)."""

from __future__ import annotations

import torch
from torch import Tensor

from pytest_dmlbench.robust._checks import compute_dtype, finite_rows, row_norms
from pytest_dmlbench.robust.aggregators import median


def centered_clipping(
    x: Tensor, *, f: int, tau: float = 1.0, iterations: int = 1, center: Tensor | None = None
) -> Tensor:
    """Centered clipping: v <- v + (1/n) sum_i (x_i - v) min(1, tau/||x_i - v||), ``iterations`` times.

    Starts from ``center`` (for a stateful server: the previous aggregate or momentum) or, by default,
    from the coordinate median (which then needs f < n/2). Stateless per call. Rows holding inf/NaN
    contribute nothing (their clipped difference has no defined direction). Reference: Karimireddy,
    He and Jaggi, "Learning from history for Byzantine robust optimization", ICML 2021.
    """
    n = x.shape[0]
    if not tau > 0:
        raise ValueError(f"centered_clipping requires tau > 0, got tau={tau}")
    if isinstance(iterations, bool) or not isinstance(iterations, int) or iterations < 1:
        raise ValueError(f"centered_clipping requires iterations >= 1, got iterations={iterations!r}")
    dtype = compute_dtype(x)
    if center is None:
        v = median(x, f=f).to(dtype)
    else:
        if center.shape != x.shape[1:]:
            raise ValueError(f"centered_clipping: center must have shape {tuple(x.shape[1:])}, "
                             f"got {tuple(center.shape)}")
        v = center.to(device=x.device, dtype=dtype)
    finite = finite_rows(x)
    rows = (x if bool(finite.all()) else x[finite]).to(dtype)
    for _ in range(iterations):
        diff = rows - v
        scale = (tau / row_norms(diff)).clamp(max=1.0).nan_to_num(nan=1.0)  # 0/0: the row equals v
        v = v + (scale @ diff) / n
    return v.to(x.dtype)


def clip(x: Tensor, *, f: int, c: float) -> Tensor:
    """Pre-aggregation: x_i * min(1, c/||x_i||) for every finite row; rows holding inf/NaN pass unchanged
    for the aggregator to discard. Precondition: c > 0.
    """
    if not c > 0:
        raise ValueError(f"clip requires c > 0, got c={c}")
    norms = row_norms(x.to(compute_dtype(x)))
    scale = (c / norms).clamp(max=1.0)
    scale = torch.where(finite_rows(x), scale, torch.ones_like(scale)).nan_to_num(nan=1.0)
    return x * scale.to(x.dtype)[:, None]
