"""Shared strategies, brute-force references and property checkers for the robust tests.

Each checker returns True when the property holds for one example, so the same code is asserted on the
robust rules and shown (by ``hypothesis.find``) to fail on the mean: the negative control.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import torch
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from pytest_dmlbench.robust import aggregate
from pytest_dmlbench.robust.pre import PreSpec

VALUE = st.floats(-100.0, 100.0, allow_nan=False, allow_infinity=False, allow_subnormal=False)

# smallest n accepted by each rule for a given f (its precondition)
MIN_N: dict[str, Callable[[int], int]] = {
    "mean": lambda f: max(1, f),
    "median": lambda f: 2 * f + 1,
    "trimmed_mean": lambda f: 2 * f + 1,
    "meamed": lambda f: 2 * f + 1,
    "krum": lambda f: 2 * f + 3,
    "multi_krum": lambda f: 2 * f + 3,
    "bulyan": lambda f: 4 * f + 3,
    "geometric_median": lambda f: 2 * f + 1,
    "centered_clipping": lambda f: 2 * f + 1,
}
ROBUST_RULES = [name for name in MIN_N if name != "mean"]
COORDINATE_RULES = ["mean", "median", "trimmed_mean", "meamed"]
KRUM_FAMILY = ["krum", "multi_krum", "bulyan"]


@dataclass(frozen=True)
class Example:
    x: np.ndarray  # (n, d) float64
    f: int

    @property
    def tensor(self) -> torch.Tensor:
        return torch.from_numpy(self.x.copy())


@st.composite
def examples(draw: st.DrawFn, rule: str, max_f: int = 2, max_extra: int = 3, max_d: int = 3) -> Example:
    """An (n, d) float64 matrix and an f satisfying ``rule``'s precondition."""
    f = draw(st.integers(0, max_f))
    n = draw(st.integers(max(1, MIN_N[rule](f)), max(1, MIN_N[rule](f)) + max_extra))
    d = draw(st.integers(1, max_d))
    return Example(draw(arrays(np.float64, (n, d), elements=VALUE)), f)


@dataclass(frozen=True)
class Attacked:
    """n-f honest rows (all equal to ``c`` when built by ``honest_equal``) and f arbitrary rows."""

    x: np.ndarray
    f: int
    honest: np.ndarray  # indices of the honest rows


@st.composite
def attacked(draw: st.DrawFn, rule: str, *, equal_honest: bool, max_f: int = 2, max_d: int = 3) -> Attacked:
    f = draw(st.integers(1, max_f))
    n = draw(st.integers(MIN_N[rule](f), MIN_N[rule](f) + 3))
    d = draw(st.integers(1, max_d))
    if equal_honest:
        c = draw(arrays(np.float64, (d,), elements=VALUE))
        honest_rows = np.tile(c, (n - f, 1))
    else:
        honest_rows = draw(arrays(np.float64, (n - f, d), elements=VALUE))
    attackers = draw(arrays(np.float64, (f, d), elements=st.floats(-1e4, 1e4, allow_subnormal=False)))
    order = np.array(draw(st.permutations(range(n))))
    x = np.empty((n, d))
    x[order[: n - f]] = honest_rows
    x[order[n - f :]] = attackers
    return Attacked(x, f, np.sort(order[: n - f]))


def run(rule: str, x: np.ndarray, f: int, **params: object) -> np.ndarray:
    return aggregate(rule, torch.from_numpy(x.copy()), f=f, **params).numpy()  # type: ignore[arg-type]


# ---- brute-force references (direct distances, explicit loops) ----

def direct_sq_distances(x: np.ndarray) -> np.ndarray:
    return np.array([[float(np.sum((a - b) ** 2)) for b in x] for a in x])


def krum_scores_reference(x: np.ndarray, neighbours: int) -> np.ndarray:
    dist = direct_sq_distances(x)
    return np.array([np.sort(np.delete(dist[i], i))[:neighbours].sum() for i in range(len(x))])


def boundary_gap(scores: np.ndarray, m: int, rows: np.ndarray | None = None, tol: float = 0.0) -> float:
    """Gap between the m-th and (m+1)-th smallest scores (inf when all are selected, or when every
    row within ``tol`` of the boundary is identical, so that the choice among them cannot matter)."""
    ordered = np.sort(scores)
    if m >= len(ordered):
        return float("inf")
    gap = float(ordered[m] - ordered[m - 1])
    if rows is not None and gap <= tol:
        band = rows[np.abs(scores - ordered[m - 1]) <= tol + gap]
        if all(np.array_equal(row, band[0]) for row in band):
            return float("inf")
    return gap


TIE_TOL = 1e-6


def meamed_reference(x: np.ndarray, keep: int) -> tuple[np.ndarray, float]:
    """Mean of the ``keep`` values closest to the median per column, and the smallest boundary gap."""
    med = np.median(x, axis=0)
    tol = TIE_TOL * scale_of(x) ** 2
    out, gaps = [], []
    for j in range(x.shape[1]):
        dist = np.abs(x[:, j] - med[j])
        order = np.argsort(dist, kind="stable")
        out.append(x[order[:keep], j].mean())
        gaps.append(boundary_gap(dist, keep, x[:, j : j + 1], tol))
    return np.array(out), min(gaps)


def bulyan_reference(x: np.ndarray, f: int) -> tuple[np.ndarray, float]:
    """Bulyan by explicit repeated Krum; returns the result and the smallest selection gap met."""
    n = len(x)
    theta, remaining, picked, gaps = n - 2 * f, list(range(n)), [], []
    if f == 0:
        return x.mean(axis=0), float("inf")
    for _ in range(theta):
        sub = x[remaining]
        scores = krum_scores_reference(sub, min(max(1, len(sub) - f - 2), len(sub) - 1))
        gaps.append(boundary_gap(scores, 1, sub, TIE_TOL * scale_of(x) ** 2))
        picked.append(remaining.pop(int(np.argmin(scores))))
    result, gap = meamed_reference(x[sorted(picked)], theta - 2 * f)
    return result, min([*gaps, gap])


def nnm_reference(x: np.ndarray, f: int) -> tuple[np.ndarray, float]:
    """Nearest-neighbour mixing by explicit loops, and the smallest neighbour-selection gap."""
    dist = direct_sq_distances(x)
    keep = len(x) - f
    mixed, gaps = [], []
    for i in range(len(x)):
        order = np.argsort(dist[i], kind="stable")
        mixed.append(x[order[:keep]].mean(axis=0))
        gaps.append(boundary_gap(dist[i], keep, x, TIE_TOL * scale_of(x) ** 2))
    return np.array(mixed), min(gaps)


def selection_gap(rule: str, x: np.ndarray, f: int, pre: list[PreSpec] | None = None) -> float:
    """How far the example is from a tie at a selection boundary of ``rule`` (inf: no selection)."""
    if pre == ["nnm"]:
        mixed, gap = nnm_reference(x, f)
        return min(gap, selection_gap(rule, mixed, f))
    n = len(x)
    tol = TIE_TOL * scale_of(x) ** 2
    if rule == "krum":
        return boundary_gap(krum_scores_reference(x, n - f - 2), 1, x, tol)
    if rule == "multi_krum":
        return boundary_gap(krum_scores_reference(x, min(max(1, n - f - 2), n - 1)), n - f, x, tol)
    if rule == "bulyan":
        return bulyan_reference(x, f)[1]
    if rule == "meamed":
        return meamed_reference(x, n - f)[1]
    return float("inf")


def scale_of(x: np.ndarray) -> float:
    return float(np.max(np.abs(x))) + 1.0


# ---- property checkers (True = property holds on this example) ----

def identical_honest_kept(rule: str, ex: Attacked) -> bool:
    """Property 8: with every honest row equal to c, the output is c."""
    c = ex.x[ex.honest[0]]
    tol = 1e-6 * scale_of(ex.x) if rule == "geometric_median" else 1e-9 * scale_of(c)
    return bool(np.allclose(run(rule, ex.x, ex.f), c, rtol=0.0, atol=tol))


def within_honest_bounds(rule: str, ex: Attacked) -> bool:
    """Property 9 (coordinate rules): output between the honest min and max in every coordinate."""
    out = run(rule, ex.x, ex.f)
    honest = ex.x[ex.honest]
    tol = 1e-12 * scale_of(honest)
    return bool(np.all(out >= honest.min(axis=0) - tol) and np.all(out <= honest.max(axis=0) + tol))


def returns_an_input(rule: str, ex: Attacked) -> bool:
    """Property 9 (Krum): the output is one of the input rows."""
    out = run(rule, ex.x, ex.f)
    return any(np.array_equal(out, row) for row in ex.x)


def kappa(rule: str, n: int, f: int) -> float:
    """(f, kappa) coefficients of Allouah et al. 2023 (AISTATS), Table 1."""
    r = f / (n - 2 * f)
    return {
        "krum": 6 * (1 + r),
        "geometric_median": 4 * (1 + r) ** 2,
        "median": 4 * (1 + r) ** 2,
        "trimmed_mean": 6 * r * (1 + r),
        "mean": 4 * (1 + r) ** 2,  # any finite kappa: the mean has none
    }[rule]


def kappa_robust(rule: str, ex: Attacked) -> bool:
    """Property 10: ||F - mean_S||^2 <= kappa/|S| sum_S ||x_i - mean_S||^2 for EVERY S of size n-f."""
    n, f = len(ex.x), ex.f
    out = run(rule, ex.x, f)
    k = kappa(rule, n, f)
    for subset in itertools.combinations(range(n), n - f):
        rows = ex.x[list(subset)]
        centre = rows.mean(axis=0)
        lhs = float(np.sum((out - centre) ** 2))
        rhs = k / len(rows) * float(np.sum((rows - centre) ** 2))
        slack = (1e-5 if rule == "geometric_median" else 1e-6) * scale_of(ex.x)
        if lhs > rhs + slack**2:
            return False
    return True
