"""One-sided Mann-Whitney U test (numpy only; scipy is used by the tests as a cross-check).

``U`` counts the pairs (x_i, y_j) with x_i > y_j, ties counting one half. Without ties and for small
samples (``n1 * n2 <= EXACT_MAX_PAIRS``) the p-value is exact, from the null distribution of U computed as
the coefficients of the Gaussian binomial coefficient [n1 + n2 choose n1]_q in exact integer arithmetic.
Otherwise the normal approximation with tie correction and continuity correction is used (as scipy does).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Literal

import numpy as np

Alternative = Literal["greater", "less"]

EXACT_MAX_PAIRS = 900
"""Use the exact distribution up to n1 * n2 pairs (e.g. 30 x 30); beyond it the normal approximation."""


@dataclass(frozen=True)
class MannWhitneyResult:
    """U of the first sample, the one-sided p-value and how it was computed."""

    u: float
    p_value: float
    method: Literal["exact", "normal"]
    n1: int
    n2: int
    has_ties: bool

    @property
    def min_attainable_p(self) -> float:
        """The smallest p-value these sample sizes can give (1 / C(n1 + n2, n1) without ties)."""
        if self.n1 == 0 or self.n2 == 0:
            return 1.0
        return 1.0 / math.comb(self.n1 + self.n2, self.n1)


@lru_cache(maxsize=64)
def _u_counts(n1: int, n2: int) -> tuple[int, ...]:
    """Number of orderings giving each U = 0 .. n1*n2 (coefficients of the q-binomial [n1+n2, n1])."""
    coeffs = [1]
    for i in range(1, n1 + 1):
        # multiply by (1 - q^(n2 + i)) ...
        shift = n2 + i
        grown = coeffs + [0] * shift
        for k in range(len(grown) - 1, shift - 1, -1):
            grown[k] -= grown[k - shift]
        # ... and divide exactly by (1 - q^i): a running sum with stride i.
        for k in range(i, len(grown)):
            grown[k] += grown[k - i]
        coeffs = grown[: i * n2 + 1]
    return tuple(coeffs)


def _exact_sf(u: int, n1: int, n2: int) -> float:
    """P(U >= u) under the null hypothesis."""
    counts = _u_counts(n1, n2)
    total = math.comb(n1 + n2, n1)
    upper = sum(counts[max(u, 0) :])
    return upper / total


def mann_whitney_u(
    x: Sequence[float] | np.ndarray, y: Sequence[float] | np.ndarray, alternative: Alternative
) -> MannWhitneyResult:
    """Test whether ``x`` tends to be greater (``alternative="greater"``) or less than ``y``.

    Samples must be finite (drop NaN first). Either sample empty gives p = 1.
    """
    a = np.asarray(x, dtype=float)
    b = np.asarray(y, dtype=float)
    if not (np.all(np.isfinite(a)) and np.all(np.isfinite(b))):
        raise ValueError("mann_whitney_u: samples must be finite; drop NaN/inf samples first")
    if alternative not in ("greater", "less"):
        raise ValueError(f"alternative must be 'greater' or 'less', got {alternative!r}")
    n1, n2 = a.size, b.size
    if n1 == 0 or n2 == 0:
        return MannWhitneyResult(float("nan"), 1.0, "exact", n1, n2, False)

    pooled = np.concatenate([a, b])
    values, inverse, tie_sizes = np.unique(pooled, return_inverse=True, return_counts=True)
    # Midranks: the average 1-based rank of each distinct value.
    upper_rank = np.cumsum(tie_sizes)
    midranks = upper_rank - (tie_sizes - 1) / 2.0
    ranks = midranks[inverse]
    u1 = float(ranks[:n1].sum() - n1 * (n1 + 1) / 2.0)
    has_ties = bool(values.size < pooled.size)
    # For "less", test y > x: U of y is n1*n2 - U1.
    u_stat = u1 if alternative == "greater" else n1 * n2 - u1

    if not has_ties and n1 * n2 <= EXACT_MAX_PAIRS:
        p = _exact_sf(round(u_stat), n1, n2)
        return MannWhitneyResult(u1, min(p, 1.0), "exact", n1, n2, has_ties)

    n = n1 + n2
    tie_term = float(np.sum(tie_sizes.astype(float) ** 3 - tie_sizes)) / (n * (n - 1))
    variance = n1 * n2 / 12.0 * ((n + 1) - tie_term)
    if variance <= 0.0:  # every sample equal: no evidence either way
        return MannWhitneyResult(u1, 1.0, "normal", n1, n2, has_ties)
    z = (u_stat - n1 * n2 / 2.0 - 0.5) / math.sqrt(variance)
    p = 0.5 * math.erfc(z / math.sqrt(2.0))
    return MannWhitneyResult(u1, min(max(p, 0.0), 1.0), "normal", n1, n2, has_ties)
