"""The hand-written Mann-Whitney U against scipy (a test-only dependency)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pytest_dmlbench.baseline import mannwhitney
from pytest_dmlbench.baseline.mannwhitney import _u_counts, mann_whitney_u

scipy_stats = pytest.importorskip(
    "scipy.stats", reason="scipy cross-checks the statistics (pip install scipy)"
)


@pytest.mark.parametrize("n1,n2", [(1, 1), (1, 5), (3, 4), (7, 7), (10, 12), (20, 20), (30, 30)])
@pytest.mark.parametrize("alternative", ["greater", "less"])
def test_exact_p_value_matches_scipy_without_ties(n1: int, n2: int, alternative: str) -> None:
    rng = np.random.default_rng(n1 * 100 + n2)
    x = rng.normal(0.3, 1.0, n1)
    y = rng.normal(0.0, 1.0, n2)
    ours = mann_whitney_u(x, y, alternative)  # type: ignore[arg-type]
    ref = scipy_stats.mannwhitneyu(x, y, alternative=alternative, method="exact")
    assert ours.method == "exact"
    assert ours.u == pytest.approx(ref.statistic)
    assert ours.p_value == pytest.approx(ref.pvalue, rel=1e-9)


@pytest.mark.parametrize("n1,n2", [(5, 8), (15, 15), (40, 50)])
def test_normal_approximation_with_ties_matches_scipy(n1: int, n2: int) -> None:
    rng = np.random.default_rng(n1 + n2)
    x = rng.integers(0, 6, n1).astype(float)  # many ties
    y = rng.integers(1, 7, n2).astype(float)
    for alternative in ("greater", "less"):
        ours = mann_whitney_u(x, y, alternative)
        ref = scipy_stats.mannwhitneyu(
            x, y, alternative=alternative, method="asymptotic", use_continuity=True
        )
        assert ours.method == "normal" and ours.has_ties
        assert ours.p_value == pytest.approx(ref.pvalue, rel=1e-9)


def test_large_samples_use_the_normal_approximation_like_scipy() -> None:
    rng = np.random.default_rng(7)
    x, y = rng.normal(0.1, 1, 60), rng.normal(0, 1, 60)
    ours = mann_whitney_u(x, y, "greater")
    ref = scipy_stats.mannwhitneyu(x, y, alternative="greater", method="asymptotic")
    assert ours.method == "normal"
    assert ours.p_value == pytest.approx(ref.pvalue, rel=1e-9)


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.integers(0, 30), min_size=1, max_size=12),
    st.lists(st.integers(0, 30), min_size=1, max_size=12),
    st.sampled_from(["greater", "less"]),
)
def test_agrees_with_scipy_on_arbitrary_small_samples(x: list[int], y: list[int], alternative: str) -> None:
    ours = mann_whitney_u(x, y, alternative)  # type: ignore[arg-type]
    method = "exact" if ours.method == "exact" else "asymptotic"
    ref = scipy_stats.mannwhitneyu(x, y, alternative=alternative, method=method)
    if math.isnan(ref.pvalue):
        assert ours.p_value == 1.0
    else:
        assert ours.p_value == pytest.approx(ref.pvalue, rel=1e-9, abs=1e-12)


def test_u_distribution_counts_every_ordering() -> None:
    for n1, n2 in [(1, 1), (2, 3), (5, 5), (8, 3)]:
        counts = _u_counts(n1, n2)
        assert len(counts) == n1 * n2 + 1
        assert sum(counts) == math.comb(n1 + n2, n1)
        assert counts == counts[::-1]  # U is symmetric under the null
    assert _u_counts(2, 2) == (1, 1, 2, 1, 1)


def test_negative_control_a_wrong_distribution_breaks_the_scipy_agreement(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Guards the cross-check itself: an off-by-one in the tail sum must not pass unnoticed."""
    x, y = [5.0, 6.0, 7.0, 8.0], [1.0, 2.0, 3.0, 6.5]
    ref = scipy_stats.mannwhitneyu(x, y, alternative="greater", method="exact").pvalue

    def off_by_one(u: int, n1: int, n2: int) -> float:
        return sum(_u_counts(n1, n2)[u + 1 :]) / math.comb(n1 + n2, n1)

    monkeypatch.setattr(mannwhitney, "_exact_sf", off_by_one)
    assert mann_whitney_u(x, y, "greater").p_value != pytest.approx(ref, rel=1e-9)


def test_identical_samples_on_both_sides_give_no_evidence() -> None:
    result = mann_whitney_u([1.0] * 10, [1.0] * 10, "greater")
    assert result.p_value == 1.0


def test_one_against_one_can_never_be_significant() -> None:
    result = mann_whitney_u([2.0], [1.0], "greater")
    assert result.p_value == 0.5 and result.min_attainable_p == 0.5


def test_rejects_nan_samples() -> None:
    with pytest.raises(ValueError, match="drop NaN"):
        mann_whitney_u([1.0, float("nan")], [1.0], "greater")
