"""Coordinate-wise aggregation rules: mean, median, trimmed mean, meamed.

Non-finite entries are ordered as in ``torch.sort``: -inf first, NaN after +inf. A rule whose trimming
covers the f attacker rows therefore never reaches their inf/NaN entries.
"""

from __future__ import annotations

import torch
from torch import Tensor

from pytest_dmlbench.robust._checks import require
from pytest_dmlbench.robust.columnwise import map_columns, sort_columns


def mean(x: Tensor, *, f: int) -> Tensor:
    """Coordinate-wise mean of the rows. No precondition on f; not robust (one row moves it anywhere)."""
    return x.mean(dim=0)


def sorted_median(ordered: Tensor) -> Tensor:
    """Median of each column of an already sorted block (mean of the two middle values for even n)."""
    n = ordered.shape[0]
    if n % 2 == 1:
        return ordered[n // 2]
    return ordered[n // 2 - 1] * 0.5 + ordered[n // 2] * 0.5


def median(x: Tensor, *, f: int) -> Tensor:
    """Coordinate-wise median; for even n the average of the two middle values (numpy's convention).

    Precondition: f < n/2. Reference: Yin et al., "Byzantine-robust distributed learning: towards
    optimal statistical rates", ICML 2018.
    """
    n = x.shape[0]
    require(2 * f < n, "median", "f < n/2", n=n, f=f)
    return map_columns(x, lambda block: sorted_median(sort_columns(block)))


def trimmed_mean(x: Tensor, *, f: int, b: int | None = None) -> Tensor:
    """Per coordinate, drop the b largest and b smallest values and average the rest (b = f by default).

    Precondition: n > 2b. Reference: Yin et al., ICML 2018.
    """
    n = x.shape[0]
    trim = f if b is None else b
    if isinstance(trim, bool) or not isinstance(trim, int) or trim < 0:
        raise ValueError(f"trimmed_mean: b must be a non-negative int, got b={b!r}")
    require(n > 2 * trim, "trimmed_mean", "n > 2b", n=n, b=trim, f=f)
    if trim == 0:
        return x.mean(dim=0)
    return map_columns(x, lambda block: sort_columns(block)[trim : n - trim].mean(dim=0))


def closest_to_median_mean(block: Tensor, keep: int) -> Tensor:
    """Per column, the mean of the ``keep`` values closest to the column median.

    Those values are a window s[i : i+keep] of the sorted column, 0 <= i <= n-keep, whose radius
    max(m - s[i], s[i+keep-1] - m) is minimal. When several windows tie (an exact tie at the selection
    boundary) the result is the average over all of them, which keeps the rule invariant under
    permutation and negation of the inputs. NaN sorts last and counts as infinitely far.
    """
    ordered = sort_columns(block)
    n = ordered.shape[0]
    windows = n - keep + 1
    centre = sorted_median(ordered)
    radius = torch.maximum(centre - ordered[:windows], ordered[keep - 1 :] - centre)
    radius = radius.nan_to_num(nan=torch.inf)
    best = radius == radius.min(dim=0).values
    start = best.to(torch.uint8).argmax(dim=0)  # the first minimal window
    offsets = torch.arange(keep, device=block.device)[:, None]
    result = torch.gather(ordered, 0, start[None, :] + offsets).sum(dim=0) / keep
    tied = (best.sum(dim=0) > 1).nonzero().flatten()
    if tied.numel():
        result[tied] = _average_of_windows(ordered[:, tied], best[:, tied], keep)
    return result


def _average_of_windows(ordered: Tensor, best: Tensor, keep: int) -> Tensor:
    """Mean over all minimal windows (``best``) of each window's mean, by exact coverage counts."""
    n = ordered.shape[0]
    windows = best.shape[0]
    covered = torch.cumsum(best.to(torch.int64), dim=0)  # covered[i] = minimal windows starting <= i
    positions = torch.arange(n, device=ordered.device)
    first = positions - keep
    weight = covered[positions.clamp(max=windows - 1)] - torch.where(
        first[:, None] >= 0, covered[first.clamp(min=0)], 0
    )
    weight = weight.to(ordered.dtype)
    total = torch.where(weight > 0, ordered * weight, 0.0).sum(dim=0)
    return total / (covered[-1].to(ordered.dtype) * keep)


def meamed(x: Tensor, *, f: int) -> Tensor:
    """Mean around the median: per coordinate, average the n-f values closest to the coordinate median.

    An exact tie at the selection boundary averages over the equally close choices (see
    ``closest_to_median_mean``). Precondition: f < n/2. Reference: Xie, Koyejo and Gupta,
    "Generalized Byzantine-tolerant SGD", 2018.
    """
    n = x.shape[0]
    require(2 * f < n, "meamed", "f < n/2", n=n, f=f)
    return map_columns(x, lambda block: closest_to_median_mean(block, n - f))
