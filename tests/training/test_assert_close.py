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


def test_the_verdict_is_agreed_on_every_rank_naming_the_failing_ones() -> None:
    """raise_on_all_ranks on 4 simulated ranks: ranks 1 and 3 fail, so every rank raises naming [1, 3] (the failing
    ranks with their own message); when no rank fails, none raises."""
    import torch.distributed as dist

    from pytest_dmlbench.training.reference import raise_on_all_ranks
    from tests.world.simulated.helpers import passed, simulate

    def body(info: object) -> None:
        raise_on_all_ranks(None, what="params")  # negative control: nobody failed, nobody raises
        rank = dist.get_rank()
        error = f"rank {rank} is off" if rank in (1, 3) else None
        with pytest.raises(AssertionError) as raised:
            raise_on_all_ranks(error, what="params")
        detail = f"rank {rank} is off" if error else "params: this rank agreed"
        assert str(raised.value).startswith(f"failed on rank(s) [1, 3]: {detail}"), str(raised.value)

    assert passed(simulate(body, 4), 4)
