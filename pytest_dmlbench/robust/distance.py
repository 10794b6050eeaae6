"""Distance-based rules: Krum, Multi-Krum, Bulyan, geometric median, and their distance helpers.

Pairwise squared distances use the Gram matrix of the rows centred on a robust mean (one matrix product
instead of n^2 passes over the data). Centring removes the common offset that makes the Gram identity
||a||^2 + ||b||^2 - 2<a, b> lose precision; the tests compare the result with direct distances.
Rows holding inf or NaN are at distance +inf from every row, so they never win a selection.
"""

from __future__ import annotations

import torch
from torch import Tensor

from pytest_dmlbench.robust._checks import compute_dtype, finite_rows, require, row_norms
from pytest_dmlbench.robust.aggregators import closest_to_median_mean
from pytest_dmlbench.robust.columnwise import map_columns


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

    The rows are centred on the mean of the n-f finite rows of smallest norm, so up to f huge rows
    neither overflow the honest distances nor drown them in rounding error.
    """
    n = x.shape[0]
    finite = finite_rows(x)
    rows = x if bool(finite.all()) else x[finite]
    rows = rows.to(compute_dtype(x))
    centred = rows - small_norm_mean(rows, f)
    gram = (centred @ centred.T).double()
    sq_norms = gram.diagonal()
    dist = (sq_norms[:, None] + sq_norms[None, :] - 2.0 * gram).clamp_min(0.0)
    dist = ((dist + dist.T) * 0.5).nan_to_num(nan=torch.inf)
    dist.fill_diagonal_(0.0)
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
    x: Tensor, *, f: int, tol: float = 1e-7, max_iter: int = 200, nu: float = 1e-12
) -> Tensor:
    """Geometric median argmin_z sum_i ||z - x_i|| by smoothed Weiszfeld iterations.

    Starts from the coordinate-wise mean of the finite rows, leaving out the f rows of largest norm
    (among them, rows with inf/NaN); weights are 1/max(nu, ||z - x_i||); rows
    with inf/NaN get weight 0 (their distance is infinite). Stops when a step is at most ``tol`` times
    the median distance from z to the inputs (translation- and scale-invariant, and not inflated by up
    to f far-away rows), when half of the inputs coincide with z, or after ``max_iter`` steps.
    Precondition: f < n/2. Reference: Pillutla, Kakade and Harchaoui, "Robust aggregation for federated
    learning", IEEE TSP 2022 (smoothed Weiszfeld).
    """
    n = x.shape[0]
    require(2 * f < n, "geometric_median", "f < n/2", n=n, f=f)
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
    # the plain mean of the finite rows when f = 0; with f > 0 the f largest-norm rows are set aside,
    # otherwise one huge row puts the start (and hundreds of Weiszfeld steps) arbitrarily far away
    z = small_norm_mean(rows, max(0, f - (n - rows.shape[0])))
    for _ in range(max_iter):
        distances = row_norms(rows - z).double()
        typical = float(torch.median(distances))  # an honest distance whenever f < n/2
        if typical == 0.0:
            break  # at least half of the inputs sit at z: z is a geometric median
        weights = 1.0 / distances.clamp_min(nu)
        weights = weights / weights.sum()
        z_next = weights.to(rows.dtype) @ rows
        step = float(torch.linalg.vector_norm((z_next - z).double()))
        z = z_next
        if step <= tol * typical:
            break
    return z.to(x.dtype)
