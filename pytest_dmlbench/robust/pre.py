"""Pre-aggregations (nearest-neighbour mixing, bucketing, clipping) and their composition.

A pre-aggregation maps the ``(n, d)`` inputs to ``(n', d)`` rows that the aggregation rule then sees,
with the same f (bucketing: each attacker spoils at most one bucket).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import torch
from torch import Tensor

from pytest_dmlbench.robust._checks import finite_rows, require
from pytest_dmlbench.robust.clipping import clip
from pytest_dmlbench.robust.distance import pairwise_sq_distances


def nnm(x: Tensor, *, f: int) -> Tensor:
    """Nearest-neighbour mixing: replace each x_i by the mean of its n-f nearest inputs (itself
    included; distance ties to the lowest index). Rows holding inf/NaN pass unchanged.

    Precondition: f < n. Reference: Allouah et al., "Fixing by mixing: a recipe for optimal Byzantine
    ML under heterogeneity", AISTATS 2023.
    """
    n = x.shape[0]
    require(f < n, "nnm", "f < n", n=n, f=f)
    if f == 0:
        return x.mean(dim=0, keepdim=True).expand(n, -1).clone()
    keep = n - f
    nearest = torch.sort(pairwise_sq_distances(x, f), dim=1, stable=True).indices[:, :keep]
    mixing = torch.zeros((n, n), dtype=x.dtype, device=x.device)
    mixing.scatter_(1, nearest, 1.0 / keep)
    finite = finite_rows(x)
    if bool(finite.all()):
        return mixing @ x
    index = finite.nonzero().flatten()
    out = x.clone()
    out[index] = mixing[index][:, index] @ x[index]
    return out


def bucketing(x: Tensor, *, f: int, s: int = 2, seed: int = 0) -> Tensor:
    """Bucketing: permute the rows with a seeded generator, then average consecutive buckets of s rows
    (the last bucket may be smaller), giving ceil(n/s) rows. The rule after it must tolerate f of those
    rows (s*f below its breakdown point). Reference: Karimireddy, He and Jaggi, "Byzantine-robust
    learning on heterogeneous datasets via bucketing", ICLR 2022.
    """
    if isinstance(s, bool) or not isinstance(s, int) or s < 1:
        raise ValueError(f"bucketing requires an int bucket size s >= 1, got s={s!r}")
    n = x.shape[0]
    generator = torch.Generator().manual_seed(seed)
    order = torch.randperm(n, generator=generator).to(x.device)
    count = -(-n // s)
    bucket_of = torch.empty(n, dtype=torch.long, device=x.device)
    bucket_of[order] = torch.arange(n, device=x.device) // s
    sizes = torch.bincount(bucket_of, minlength=count).to(x.dtype)
    if bool(finite_rows(x).all()):
        # one pass over x: a (buckets, n) averaging matrix instead of a permuted copy
        mixing = torch.zeros((count, n), dtype=x.dtype, device=x.device)
        mixing[bucket_of, torch.arange(n, device=x.device)] = 1.0
        return (mixing / sizes[:, None]) @ x
    # inf/NaN rows: 0 * inf would spread them to every bucket through the matrix product
    out = torch.zeros((count, x.shape[1]), dtype=x.dtype, device=x.device)
    out.index_add_(0, bucket_of, x)
    return out / sizes[:, None]


PreAggregation = Callable[..., Tensor]
PRE_AGGREGATIONS: dict[str, PreAggregation] = {"nnm": nnm, "bucketing": bucketing, "clip": clip}
PreSpec = str | tuple[str, Mapping[str, Any]]


def parse_pre(pre: PreSpec | Sequence[PreSpec] | None) -> list[tuple[str, dict[str, Any]]]:
    """Normalise ``pre`` to a list of (name, params): accepts "nnm", ("clip", {"c": 1.0}) or a list."""
    if pre is None:
        return []
    items: Sequence[Any] = [pre] if isinstance(pre, str | tuple) else pre
    steps: list[tuple[str, dict[str, Any]]] = []
    for item in items:
        if isinstance(item, str):
            name, params = item, {}
        elif isinstance(item, tuple) and len(item) == 2 and isinstance(item[1], Mapping):
            name, params = item[0], dict(item[1])
        else:
            raise TypeError(f"pre steps are names or (name, params) pairs, e.g. ('clip', {{'c': 1.0}}); "
                            f"got {item!r}")
        if name not in PRE_AGGREGATIONS:
            raise ValueError(f"unknown pre-aggregation {name!r}; valid names: {', '.join(PRE_AGGREGATIONS)}")
        steps.append((name, params))
    return steps
