"""The alpha-beta fit's arithmetic and refusals.

Timings made by the model must give back the alpha and beta they were made from: that checks the least
squares and its use of the coefficient table, not whether the model describes a real network (circular by
construction). The model against measurements it was not fitted on: tests/projection/test_holdout.py.
"""

from __future__ import annotations

import pytest

from pytest_dmlbench.projection.collective_model import MODELLED_OPS, FitError, Timing, coefficients, fit
from tests.projection.synthetic import ALPHA, BETA, SIZES


def timings(op: str, world_sizes: tuple[int, ...], alpha: float = ALPHA, beta: float = BETA,
            model_op: str | None = None) -> list[Timing]:
    rows = []
    for p in world_sizes:
        latency, width = coefficients(model_op or op, p)
        rows += [Timing(op, p, n, latency * alpha + width * n * beta) for n in SIZES]
    return rows


@pytest.mark.parametrize("op", MODELLED_OPS)
@pytest.mark.parametrize("world_sizes", [(4,), (2, 4, 8)], ids=["ws4", "ws2-4-8"])
def test_arithmetic_model_made_timings_give_back_alpha_and_beta(op: str, world_sizes: tuple[int, ...]) -> None:
    fitted = fit(op, timings(op, world_sizes))
    assert fitted.alpha_s == pytest.approx(ALPHA, rel=1e-9)
    assert fitted.beta_s_per_byte == pytest.approx(BETA, rel=1e-9)
    assert fitted.bandwidth_gbps == pytest.approx(2.0, rel=1e-9)
    assert fitted.max_rel_residual < 1e-9
    assert fitted.predict(1 << 20, 16) == pytest.approx(timings(op, (16,))[2].seconds, rel=1e-9)


def test_arithmetic_other_alpha_and_beta_are_given_back_too() -> None:
    fitted = fit("all_reduce", timings("all_reduce", (2, 4), alpha=3e-3, beta=1 / 0.4e9))
    assert (fitted.alpha_s, fitted.beta_s_per_byte) == pytest.approx((3e-3, 1 / 0.4e9), rel=1e-9)


def test_negative_control_timings_of_another_algorithm_are_not_recovered() -> None:
    """All-reduce timings fitted with the all-gather model (half the steps and bytes) must miss by 2x:
    the recovery check above would catch a wrong coefficient table."""
    fitted = fit("all_gather", [Timing("all_gather", t.world_size, t.nbytes, t.seconds)
                                for t in timings("all_reduce", (4,))])
    assert fitted.alpha_s == pytest.approx(2 * ALPHA, rel=1e-9)
    assert fitted.beta_s_per_byte == pytest.approx(2 * BETA, rel=1e-9)


def test_noisy_timings_report_their_residual() -> None:
    rows = timings("all_reduce", (4,))
    rows[0] = Timing("all_reduce", 4, rows[0].nbytes, rows[0].seconds * 1.5)
    assert fit("all_reduce", rows).max_rel_residual > 0.05


def test_one_size_cannot_separate_latency_from_bandwidth() -> None:
    with pytest.raises(FitError, match="two or more message sizes"):
        fit("all_reduce", timings("all_reduce", (4,))[:1])


def test_one_rank_timings_carry_no_network_cost() -> None:
    rows = [Timing("all_reduce", 1, n, 1e-6) for n in SIZES]
    with pytest.raises(FitError, match="more than one rank"):
        fit("all_reduce", rows)


def test_coefficients_follow_the_documented_table() -> None:
    assert coefficients("all_reduce", 4) == (6.0, 1.5)
    assert coefficients("reduce_scatter", 8) == (7.0, 7 / 8)
    assert coefficients("broadcast", 5) == (3.0, 3.0)
    assert coefficients("all_reduce", 1) == (0.0, 0.0)
    with pytest.raises(ValueError, match="no cost model"):
        coefficients("barrier", 4)
