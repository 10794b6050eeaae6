"""Block sizing and case matching of the paired gate (no processes)."""

from __future__ import annotations

from pathlib import Path

from pytest_dmlbench.config import DEFAULT_BLOCK_SECONDS
from pytest_dmlbench.gates.paired.pairs import BlockPair
from pytest_dmlbench.gates.paired.plan import MIN_ROUND_S, BlockPlan, case_key


def test_cases_match_whatever_rootdir_each_run_chose(tmp_path: Path) -> None:
    a_tree, b_tree = tmp_path / "repo", tmp_path / "repo" / ".git" / "wt" / "abc"
    a = case_key("repo/tests/test_x.py::test_step[4]", a_tree / "tests" / "test_x.py", a_tree)
    b = case_key("tests/test_x.py::test_step[4]", b_tree / "tests" / "test_x.py", b_tree)
    assert a == b == "tests/test_x.py::test_step[4]"
    other = case_key("tests/test_x.py::test_step[5]", b_tree / "tests" / "test_x.py", b_tree)
    assert other != a


def test_short_calls_are_grouped_into_rounds_of_about_ten_ms() -> None:
    plan = BlockPlan.for_step([0.0005] * 9)
    assert plan.iterations == round(MIN_ROUND_S / 0.0005)
    assert abs(plan.rounds * plan.iterations * 0.0005 - DEFAULT_BLOCK_SECONDS) < 0.02
    assert plan.warm_up() == BlockPlan(5, plan.iterations)  # B's warm-up: a few rounds, same grouping
    long = BlockPlan.for_step([0.05] * 3)
    assert long.iterations == 1 and long.rounds == 5  # never fewer than 5 rounds
    assert BlockPlan.for_step([], fallback_rounds=30) == BlockPlan(30, 1)


def _readings(name: str, a: list[float], b: list[float]) -> list[BlockPair]:
    return [BlockPair({name: (x,)}, {name: (y,)}) for x, y in zip(a, b, strict=True)]


def test_a_memory_peak_that_moves_block_to_block_is_inconclusive_not_a_regression() -> None:
    from pytest_dmlbench.gates.paired.single_reading import apart_or_inconclusive
    from pytest_dmlbench.gates.paired.statistics import SingleReading

    a, b = [707.0, 640.0, 730.0, 716.0], [638.0, 700.0, 630.0, 645.0]
    reading = SingleReading(711.5, 641.5, "lower", 10.0)
    kind, evidence = apart_or_inconclusive("peak_rss_mb", "lower", "regression", reading,
                                           _readings("peak_rss_mb", a, b))
    assert kind == "inconclusive"
    assert "the blocks' readings overlap (working tree 640 to 730, REF 630 to 700)" in evidence
    # negative control: readings apart over 5 blocks a side stay a regression, with the chance of that order
    kind, evidence = apart_or_inconclusive("peak_rss_mb", "lower", "regression", reading,
                                           _readings("peak_rss_mb", [707.0, 710.0, 730.0, 716.0, 712.0],
                                                     [*b, 641.0]))
    assert kind == "regression"
    assert "every block of the working tree lies above every block of REF (chance 0.004" in evidence


def test_a_single_reading_apart_over_too_few_blocks_is_inconclusive_and_an_exact_one_is_not() -> None:
    """One block a side lying apart has a chance of one half (a nightly's A/A run read a memory peak 16.7 %
    higher that way and failed the case); 4 a side, 1/70, still above alpha 0.01. A figure each side reads
    exactly alike in every block (bytes per step) stands from two blocks on."""
    from pytest_dmlbench.gates.paired.single_reading import apart_or_inconclusive
    from pytest_dmlbench.gates.paired.statistics import SingleReading

    one = SingleReading(574.1, 492.0, "lower", 5.0)
    kind, evidence = apart_or_inconclusive("peak_rss_mb", "lower", "regression", one,
                                           _readings("peak_rss_mb", [574.1], [492.0]))
    assert kind == "inconclusive" and "chance of that order with no change is 0.5" in evidence, evidence
    four = SingleReading(471.0, 618.0, "lower", 5.0)
    apart = _readings("peak_rss_mb", [471.0, 470.0, 480.0, 465.0], [618.0, 600.0, 620.0, 610.0])
    kind, _ = apart_or_inconclusive("peak_rss_mb", "lower", "improvement", four, apart)
    assert kind == "inconclusive"
    exact = SingleReading(136.0, 72.0, "lower", 50.0)
    kind, _ = apart_or_inconclusive("comm_bytes_per_step", "lower", "regression", exact,
                                    _readings("comm_bytes_per_step", [136.0, 136.0], [72.0, 72.0]))
    assert kind == "regression"
