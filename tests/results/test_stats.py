from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from pytest_dmlbench.results.stats import median_interval, summarize


@given(st.lists(st.floats(-1e6, 1e6, allow_nan=False), min_size=1, max_size=50))
def test_summary_agrees_with_numpy(samples: list[float]) -> None:
    s = summarize(samples)
    q1, med, q3 = np.quantile(samples, [0.25, 0.5, 0.75])
    assert s.median == pytest.approx(med, abs=1e-6)
    assert s.iqr == pytest.approx(q3 - q1, abs=1e-6)
    assert s.min == min(samples) and s.max == max(samples)
    assert s.rounds == len(samples)


def test_nan_samples_are_counted_but_not_summarised() -> None:
    s = summarize([1.0, float("nan"), 3.0])
    assert s.median == 2.0 and s.rounds == 3


def test_empty_samples_give_nan_statistics() -> None:
    s = summarize([])
    assert math.isnan(s.median) and s.rounds == 0


def test_infinite_samples_are_summarised_not_crashing() -> None:
    from pytest_dmlbench.results.stats import summarize as summarise_samples

    summary = summarise_samples([1.0, float("inf"), 2.0])
    assert summary.median == 2.0 and summary.max == float("inf") and summary.rounds == 3
    assert summary.stddev != summary.stddev  # NaN


@pytest.mark.parametrize(("n", "low_rank", "high_rank"), [(6, 1, 6), (10, 2, 9), (20, 6, 15), (30, 10, 21),
                                                          (60, 22, 39), (100, 40, 61)])
def test_median_interval_takes_the_tabulated_order_statistics(n: int, low_rank: int, high_rank: int) -> None:
    # ranks of the 95 % distribution-free interval of the median (Conover, Practical Nonparametric
    # Statistics, table A3; the normal approximation n/2 -+ 0.98 sqrt(n) for n = 100)
    samples = [float(rank) for rank in range(n, 0, -1)]  # unsorted on purpose
    assert median_interval(samples) == (low_rank, high_rank)


def test_median_interval_is_unbounded_with_too_few_samples() -> None:
    assert median_interval([1.0, 2.0, 3.0, 4.0, 5.0]) == (-math.inf, math.inf)
    assert median_interval([1.0, float("nan"), 2.0, 3.0, 4.0, 5.0]) == (-math.inf, math.inf)  # NaN dropped
