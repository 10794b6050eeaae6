"""The stored-baseline test on block medians: direction, zero spread, too few blocks, NaN and infinite rounds,
and metrics that are not positive (no log scale)."""

from __future__ import annotations

import math

from pytest_dmlbench.gates.stored.significance import block_test

JITTER = [1.0, 1.01, 0.99, 1.02, 0.98]


def run(level: float, blocks: int) -> list[float]:
    return [level * j for _ in range(blocks) for j in JITTER]


def test_a_consistent_shift_is_significant_the_way_it_moved_only() -> None:
    slower = block_test(run(1.3, 4), run(1.0, 4), "greater")
    assert slower.p_value < 1e-6 and slower.testable and slower.log_scale
    assert block_test(run(1.3, 4), run(1.0, 4), "less").p_value > 0.99


def test_blocks_that_differ_as_much_as_the_shift_are_not_significant() -> None:
    base = [v for level in (0.7, 1.3, 0.8, 1.2) for v in run(level, 1)]
    cur = [v for level in (1.4, 0.8, 1.3, 0.9) for v in run(level, 1)]
    assert block_test(cur, base, "greater").p_value > 0.1


def test_zero_spread_makes_any_move_significant_and_no_move_a_coin() -> None:
    assert block_test([2.0] * 10, [1.0] * 10, "greater").p_value == 0.0
    assert block_test([2.0] * 10, [1.0] * 10, "less").p_value == 1.0
    assert block_test([1.0] * 10, [1.0] * 10, "greater").p_value == 0.5


def test_two_blocks_each_side_is_the_least_that_can_be_tested() -> None:
    two = block_test(run(2.0, 2), run(1.0, 2), "greater")
    assert two.testable and two.p_value < 0.01 and two.baseline_blocks == two.current_blocks == 2
    one = block_test(run(2.0, 1), run(1.0, 4), "greater")
    assert not one.testable and one.p_value == 1.0
    assert "record more rounds" in one.describe(0.01) and "1 current blocks" in one.describe(0.01)


def test_nan_rounds_are_dropped_and_an_infinite_round_is_an_outlier_in_its_block() -> None:
    base = run(1.0, 4)
    cur = run(1.3, 4)
    cur[2] = math.inf
    base[7] = math.nan
    result = block_test(cur, base, "greater")
    assert result.baseline_rounds == 19 and result.current_rounds == 20
    assert result.p_value < 1e-6


def test_values_that_are_not_all_positive_are_compared_on_their_own_scale() -> None:
    base = [v - 1.0 for v in run(1.0, 4)]  # around 0: no ratio exists
    cur = [v - 1.0 + 0.5 for v in run(1.0, 4)]
    result = block_test(cur, base, "greater")
    assert not result.log_scale and result.p_value < 1e-6
    assert "on block medians" in result.describe(0.01)
