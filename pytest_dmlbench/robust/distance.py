"""Distance-based rules: Krum, Multi-Krum, Bulyan, geometric median, and their distance helpers.

Pairwise squared distances use the Gram identity ||a||^2 + ||b||^2 - 2<a, b> (one matrix product instead
of n^2 passes over the data). It loses precision when the rows share a large common offset, so such
rows are first centred on a robust mean; the tests compare the result with direct distances.
Rows holding inf or NaN are at distance +inf from every row, so they never win a selection.
"""

from __future__ import annotations

import torch
from torch import Tensor

from pytest_dmlbench.robust._checks import compute_dtype, finite_rows, require, row_norms
from pytest_dmlbench.robust.aggregators import closest_to_median_mean
from pytest_dmlbench.robust.columnwise import map_columns

# The uncentred Gram identity loses about eps * ||x||^2 / ||x_i - x_j||^2 of relative precision; it is
# used when typical squared norms are at most this many times the typical squared distance.
GRAM_NORM_RATIO = {torch.float64: 1e6, torch.float32: 16.0}


def gram_sq_distances(rows: Tensor) -> tuple[Tensor, Tensor]:
    """Squared distances from the Gram matrix of ``rows`` (float64, symmetric, NaN mapped to +inf),
    and the rows' squared norms."""
    gram = (rows @ rows.T).double()
    sq_norms = gram.diagonal().clone()
    dist = (sq_norms[:, None] + sq_norms[None, :] - 2.0 * gram).clamp_min(0.0)
    dist = ((dist + dist.T) * 0.5).nan_to_num(nan=torch.inf)
    dist.fill_diagonal_(0.0)
    return dist, sq_norms


def small_norm_mean(rows: Tensor, f: int) -> Tensor:
    """Mean of the max(1, m-f) rows of smallest norm (of m rows): the mean once up to f outliers of
    large norm are set aside. Equals the coordinate mean when f = 0."""
    norms = row_norms(rows).nan_to_num(nan=torch.inf)
    inner = torch.sort(norms, stable=True).indices[: max(1, rows.shape[0] - f)]
    if not bool(torch.isfinite(norms[inner]).all()):
        return rows[inner].mean(dim=0)
    weights = torch.zeros(rows.shape[0], dtype=rows.dtype, device=rows.device)
    weights[inner] = 1.0 / inner.numel()
    return weights @ rows


def pairwise_sq_distances(x: Tensor, f: int = 0) -> Tensor:
    """Symmetric ``(n, n)`` float64 matrix of squared Euclidean distances; +inf for non-finite rows.

    When the typical squared norm exceeds ``GRAM_NORM_RATIO`` times the typical squared distance, the
    rows are centred on the mean of their n-f finite rows of smallest norm first, so a common offset
    (or up to f huge rows) neither overflows the honest distances nor drowns them in rounding error.
    """
    n = x.shape[0]
    finite = finite_rows(x)
    rows = x if bool(finite.all()) else x[finite]
    rows = rows.to(compute_dtype(x))
    dist, sq_norms = gram_sq_distances(rows)
    m = rows.shape[0]
    if m > 1:
        # medians: up to f outlying rows do not decide which path the honest rows get
        typical_norm = float(torch.median(sq_norms.nan_to_num(nan=torch.inf)))
        typical_distance = float(torch.median(dist[~torch.eye(m, dtype=torch.bool, device=dist.device)]))
        if not typical_norm <= GRAM_NORM_RATIO.get(rows.dtype, 16.0) * typical_distance:
            dist, _ = gram_sq_distances(rows - small_norm_mean(rows, f))
    if rows.shape[0] == n:
        return dist
    full = torch.full((n, n), torch.inf, dtype=torch.float64, device=x.device)
    index = finite.nonzero().flatten()
    full[index[:, None], index[None, :]] = dist
    return full


def krum_scores(dist: Tensor, neighbours: int) -> Tensor:
    """Score of each row: sum of its ``neighbours`` smallest squared distances to the other rows."""
    others = dist.clone()
    others.fill_diagonal_(torch.inf)
    return torch.sort(others, dim=1).values[:, :neighbours].sum(dim=1)


def krum_neighbours(n: int, f: int) -> int:
    """Neighbours counted in a Krum score among n inputs: n-f-2, at least 1 (as Flower), at most n-1."""
    return min(max(1, n - f - 2), n - 1)


def krum(x: Tensor, *, f: int) -> Tensor:
    """Krum: the input with the lowest score, score(i) = sum of squared distances to its n-f-2 nearest
    other inputs; ties go to the lowest index.

    Precondition: n >= 2f+3. Reference: Blanchard et al., "Machine learning with adversaries: Byzantine
    tolerant gradient descent", NeurIPS 2017.
    """
    n = x.shape[0]
    require(n >= 2 * f + 3, "krum", "n >= 2f+3", n=n, f=f)
    scores = krum_scores(pairwise_sq_distances(x, f), n - f - 2)
    return x[int(torch.argmin(scores))].clone()


def multi_krum(x: Tensor, *, f: int, m: int | None = None) -> Tensor:
    """Multi-Krum: mean of the m inputs with the lowest Krum scores (m = n-f by default; ties to the
    lowest index). Scores count max(1, n-f-2) neighbours so that small n stay defined (as Flower).

    Precondition: 1 <= m <= n-f; Krum's guarantee needs n >= 2f+3. Reference: Blanchard et al.,
    NeurIPS 2017.
    """
    n = x.shape[0]
    keep = n - f if m is None else m
    require(1 <= keep <= n - f, "multi_krum", "1 <= m <= n-f", n=n, f=f, m=keep)
    if n == 1:
        return x[0].clone()
    scores = krum_scores(pairwise_sq_distances(x, f), krum_neighbours(n, f))
    chosen = torch.sort(scores, stable=True).indices[:keep]
    return mean_of_rows(x, chosen)


def mean_of_rows(x: Tensor, chosen: Tensor) -> Tensor:
    """Mean of the rows ``chosen`` without copying them (a weighted row sum) when every row is finite."""
    if not bool(finite_rows(x).all()):
        return x[chosen].mean(dim=0)
    weights = torch.zeros(x.shape[0], dtype=x.dtype, device=x.device)
    weights[chosen] = 1.0 / chosen.numel()
    return weights @ x


def bulyan(x: Tensor, *, f: int) -> Tensor:
    """Bulyan: pick theta = n-2f inputs by repeated Krum (each pick removed, Krum on the remaining n'
    inputs with max(1, n'-f-2) neighbours, ties to the lowest index), then per coordinate average the
    beta = theta-2f picked values closest to the coordinate median.

    Precondition: n >= 4f+3. Reference: El Mhamdi, Guerraoui and Rouault, "The hidden vulnerability of
    distributed learning in Byzantium", ICML 2018.
    """
    n = x.shape[0]
    require(n >= 4 * f + 3, "bulyan", "n >= 4f+3", n=n, f=f)
    theta = n - 2 * f
    if f == 0:
        return x.mean(dim=0)
    dist = pairwise_sq_distances(x, f)
    remaining = list(range(n))
    picked: list[int] = []
    for _ in range(theta):
        sub = dist[remaining][:, remaining]
        neighbours = krum_neighbours(len(remaining), f)
        best = int(torch.argmin(krum_scores(sub, neighbours))) if neighbours > 0 else 0
        picked.append(remaining.pop(best))
    selected = x[sorted(picked)]
    beta = theta - 2 * f
    return map_columns(selected, lambda block: closest_to_median_mean(block, beta))


def geometric_median(
    x: Tensor, *, f: int, tol: float | None = None, max_iter: int = 200, nu: float = 1e-12
) -> Tensor:
    """Geometric median argmin_z sum_i ||z - x_i|| by smoothed Weiszfeld iterations.

    Starts from the coordinate-wise mean of the finite rows (a start that is permutation-, translation-
    and scale-equivariant, so the result is too even where the minimiser is not unique); weights are
    1/max(nu, ||z - x_i||); rows
    with inf/NaN get weight 0 (their distance is infinite). Stops when a step is at most ``tol`` times
    the median distance from z to the inputs (translation- and scale-invariant, and not inflated by up
    to f far-away rows; default 1e-7 in float64, 1e-5 in lower precision, about 100 ulp), when half
    of the inputs coincide with z, or after ``max_iter`` steps. A row M times farther out than the
    honest spread costs about log(M) extra steps (clip or nnm first to bound that).
    Precondition: f < n/2. Reference: Pillutla, Kakade and Harchaoui, "Robust aggregation for federated
    learning", IEEE TSP 2022 (smoothed Weiszfeld).
    """
    n = x.shape[0]
    require(2 * f < n, "geometric_median", "f < n/2", n=n, f=f)
    if tol is None:
        tol = 1e-7 if compute_dtype(x) == torch.float64 else 1e-5
    if not tol > 0 or not nu > 0 or max_iter < 1:
        raise ValueError(
            "geometric_median: needs tol > 0, nu > 0, max_iter >= 1; "
            f"got tol={tol}, nu={nu}, max_iter={max_iter}"
        )
    finite = finite_rows(x)
    rows = x if bool(finite.all()) else x[finite]
    if rows.shape[0] == 0:
        raise ValueError("geometric_median: every input row holds inf or NaN; nothing to aggregate")
    rows = rows.to(compute_dtype(x))
    z = rows.mean(dim=0)
    for _ in range(max_iter):
        diff = rows - z
        distances = row_norms(diff).double()
        typical = float(torch.median(distances))  # an honest distance whenever f < n/2
        if typical == 0.0:
            break  # at least half of the inputs sit at z: z is a geometric median
        weights = 1.0 / distances.clamp_min(nu)
        step = (weights / weights.sum()).to(rows.dtype) @ diff
        z = z + step
        if float(torch.linalg.vector_norm(step.double())) <= tol * typical:
            break
    return z.to(x.dtype)
