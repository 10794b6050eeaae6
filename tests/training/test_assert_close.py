"""The closeness check every equivalence case rests on: tolerances, the worst value named, NaN never passes."""

from __future__ import annotations

import pytest
import torch

from pytest_dmlbench.training.reference import assert_close

EXPECTED = torch.tensor([1.0, 2.0, 3.0], dtype=torch.float64)


def test_values_within_the_tolerance_pass() -> None:
    assert_close(EXPECTED + 1e-12, EXPECTED, rtol=1e-10, atol=0.0, what="params")


def test_a_value_beyond_the_tolerance_fails_naming_the_worst() -> None:
    actual = EXPECTED.clone()
    actual[2] += 1e-3
    with pytest.raises(AssertionError, match=r"params: 1 of 3 values differ beyond rtol=1e-10, atol=0.0; "
                                             r"worst at index 2: 3\.001 vs 3\.0"):
        assert_close(actual, EXPECTED, rtol=1e-10, atol=0.0, what="params")


@pytest.mark.parametrize("side", ["actual", "expected"])
def test_nan_on_either_side_fails(side: str) -> None:
    nan = EXPECTED.clone()
    nan[1] = float("nan")
    actual, expected = (nan, EXPECTED) if side == "actual" else (EXPECTED, nan)
    with pytest.raises(AssertionError, match=r"params: 1 of 3 values differ .* worst at index 1"):
        assert_close(actual, expected, rtol=1e-10, atol=1e-12, what="params")


def test_a_shape_mismatch_fails() -> None:
    with pytest.raises(AssertionError, match=r"params: shape \(2,\) != expected \(3,\)"):
        assert_close(EXPECTED[:2], EXPECTED, rtol=1e-10, atol=0.0, what="params")


def test_matrices_name_the_flat_index() -> None:
    expected = EXPECTED.reshape(3, 1).repeat(1, 2)
    actual = expected.clone()
    actual[1, 1] = 9.0
    with pytest.raises(AssertionError, match=r"1 of 6 values differ .* worst at index 3: 9\.0 vs 2\.0"):
        assert_close(actual, expected, rtol=1e-10, atol=0.0, what="params")
