"""Student's t distribution for integer degrees of freedom, and the test levels every verdict uses.

Closed forms, no scipy: the verdict rules run in the pytest process, where a light import matters. Pure
functions, no I/O.
"""

from __future__ import annotations

import functools
import math

DEFAULT_ALPHA = 0.01
"""One-sided significance level of every verdict test (stored and paired)."""

POWER = 0.95
"""The power at which the smallest detectable change is stated."""


def student_t_sf(t: float, df: int) -> float:
    """P(T > t) for Student's t with an integer number of degrees of freedom (closed form, no scipy)."""
    if df < 1:
        raise ValueError(f"degrees of freedom must be >= 1, got {df}")
    if math.isnan(t):
        return math.nan
    if math.isinf(t):
        return 0.0 if t > 0 else 1.0
    theta = math.atan(abs(t) / math.sqrt(df))
    cos2 = math.cos(theta) ** 2
    # P(|T| < |t|) by the finite series for integer df (Abramowitz & Stegun 26.7.3 / 26.7.4).
    if df % 2 == 1:
        term, total = 1.0, 1.0
        for k in range(1, (df - 1) // 2):
            term *= cos2 * (2 * k) / (2 * k + 1)
            total += term
        inside = (2.0 / math.pi) * (theta + (math.sin(theta) * math.cos(theta) * total if df > 1 else 0.0))
    else:
        term, total = 1.0, 1.0
        for k in range(1, df // 2):
            term *= cos2 * (2 * k - 1) / (2 * k)
            total += term
        inside = math.sin(theta) * total
    upper = max(0.0, (1.0 - inside) / 2.0)
    return upper if t >= 0 else 1.0 - upper


@functools.lru_cache(maxsize=4096)
def student_t_quantile(q: float, df: int) -> float:
    """The ``q`` quantile of Student's t (bisection on the closed-form survival function; remembered, since
    the gates ask for a few levels at a few degrees of freedom over and over)."""
    if not 0.0 < q < 1.0:
        raise ValueError(f"quantile level must lie in (0, 1), got {q}")
    if q < 0.5:
        return -student_t_quantile(1.0 - q, df)
    low, high = 0.0, 1.0
    while student_t_sf(high, df) > 1.0 - q:
        high *= 2.0
    for _ in range(100):
        mid = (low + high) / 2.0
        if student_t_sf(mid, df) > 1.0 - q:
            low = mid
        else:
            high = mid
    return (low + high) / 2.0


def one_sided_t_p(move: float, scale: float, df: int) -> float:
    """P(T > move / scale) for Student's t with ``df`` degrees of freedom; with zero ``scale``, 0 for a move
    the tested way, 0.5 for none, 1 for a move the other way."""
    if scale > 0.0:
        return student_t_sf(move / scale, df)
    return 0.0 if move > 0 else (0.5 if move == 0 else 1.0)
