"""Block sizing and case matching of the paired gate (no processes)."""

from __future__ import annotations

from pathlib import Path

from pytest_dmlbench.config import DEFAULT_BLOCK_SECONDS
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
