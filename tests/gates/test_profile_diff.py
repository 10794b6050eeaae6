"""The profile diff names the operators whose time grew, largest first, and nothing within the noise."""

from __future__ import annotations

from pytest_dmlbench.gates.profile_diff import grown, growth_text
from pytest_dmlbench.measure.op_profile import BlockProfile

REF = BlockProfile(1.0, {"aten::mm": 0.40, "aten::cumsum": 0.05, "dist.all_reduce (blocked)": 0.20})


def test_the_operator_that_grew_is_named_first_with_its_share() -> None:
    here = BlockProfile(2.0, {"aten::mm": 0.402, "aten::cumsum": 0.60, "dist.all_reduce (blocked)": 0.25})
    rows = grown(here, REF)
    assert [r.name for r in rows] == ["aten::cumsum", "dist.all_reduce (blocked)"]
    assert abs(rows[0].grew_s - 0.55) < 1e-12 and abs(rows[0].share_of_a - 0.30) < 1e-12
    text = growth_text(here, REF, rows)
    assert "aten::cumsum: +550 ms (50 ms -> 600 ms, 30 % of the block; self CPU time)" in text
    assert "dist.all_reduce (blocked): +50 ms" in text and "waiting in the collective" in text
    assert "aten::mm" not in text  # 2 ms of growth is under 1 % of REF's block: noise, not named


def test_an_operator_only_the_working_tree_runs_counts_from_zero() -> None:
    here = BlockProfile(1.3, {**REF.seconds, "aten::sort": 0.3})
    assert [(r.name, r.b_s) for r in grown(here, REF)] == [("aten::sort", 0.0)]


def test_nothing_grown_is_said_in_words() -> None:
    text = growth_text(REF, REF, grown(REF, REF))
    assert "no operator or collective grew by more than 1 %" in text


def test_the_list_is_cut_at_top() -> None:
    here = BlockProfile(2.0, {f"op{i}": 0.1 * (i + 1) for i in range(8)})
    assert [r.name for r in grown(here, BlockProfile(1.0), top=3)] == ["op7", "op6", "op5"]
