"""studies/noise_levers.py estimates every recorded stage plain, canary-adjusted and order-adjusted, pair for pair."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import pytest

from studies import noise_levers
from studies.noise_levers import stage_noise
from tests.studies.running import run_study


def _document(order_effect: float, pairs: int = 16) -> dict[str, Any]:
    """One case, one stage: the block that runs second in its pair is ``order_effect`` slower."""
    rng = random.Random(1)
    first = [rng.random() < 0.5 for _ in range(pairs)]
    a, b = [], []
    for a_first in first:
        noise_a, noise_b = rng.gauss(1, 0.01), rng.gauss(1, 0.01)
        a.append(0.01 * noise_a * (1.0 if a_first else 1.0 + order_effect))
        b.append(0.01 * noise_b * (1.0 + order_effect if a_first else 1.0))
    canary = [0.003 * rng.gauss(1, 0.005) for _ in range(2 * pairs)]
    stage = {"a_first": first, "a": {"step_time_s": a}, "b": {"step_time_s": b},
             "canary": {"a": canary[:pairs], "b": canary[pairs:]}}
    return {"cases": [{"nodeid": "t.py::test_x", "extra": {"paired": {
        "block_medians": [stage], "pairs_per_stage": [pairs], "seconds": 8.0}}}]}


def test_an_order_effect_is_removed_by_the_order_adjustment_and_not_by_the_canary() -> None:
    [row] = stage_noise(_document(order_effect=0.05))
    assert row["pairs"] == 16 and row["pair_s"] == pytest.approx(0.5)
    assert row["plain"] > 4.0  # +-5 % by the order alone
    assert row["order"] < 2.0  # what is left: the blocks' own 1 % noise
    assert row["canary"] > 4.0  # the canary does not see which block ran first


def test_without_an_order_effect_the_order_adjustment_gains_nothing() -> None:
    [row] = stage_noise(_document(order_effect=0.0))
    assert row["plain"] < 2.0
    assert row["order"] >= 0.9 * row["plain"]  # a spent degree of freedom, no lower noise


def test_short_stages_have_no_adjusted_figures_and_unusable_ones_are_left_out() -> None:
    short = _document(order_effect=0.0, pairs=6)
    [row] = stage_noise(short)
    assert "order" not in row and "canary" not in row
    stage = short["cases"][0]["extra"]["paired"]["block_medians"][0]
    stage["a"]["step_time_s"][0] = 0.0  # no ratio for that pair
    assert stage_noise(short) == []


def test_a_saved_run_is_summarized_per_setting(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    stages = [{"pairs": 8, "plain": 4.0, "pair_s": 0.25, "canary": 3.0, "order": 4.0},
              {"pairs": 4, "plain": 6.0, "pair_s": 0.25}]
    saved = tmp_path / "levers.json"
    saved.write_text(json.dumps({"world_sizes": {"4": [{"setting": "pinned", "stages": stages}, {"pinned": False,
                                                                                            "stages": stages[:1]}]}}))
    done = run_study(noise_levers.main, capsys, "--summarize", str(saved))
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        "world size 4, step_time_s, base: 1 sessions, 1 stages, per-pair noise median 4.00 %, 0.25 s a pair, "
        "noise per second of pairs 2.00; 1 stages of 8+ pairs: plain 4.00 %, canary-adjusted 3.00 %, "
        "order-adjusted 4.00 %",
        "world size 4, step_time_s, pinned: 1 sessions, 2 stages, per-pair noise median 5.00 %, 0.25 s a pair, "
        "noise per second of pairs 2.50; 1 stages of 8+ pairs: plain 4.00 %, canary-adjusted 3.00 %, "
        "order-adjusted 4.00 %"]


def test_each_session_keeps_its_cases_cost_and_settled_share(tmp_path: Path,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    document = _document(order_effect=0.0)
    document["cases"][0]["verdicts"] = [{"kind": "unchanged"}, {"kind": "inconclusive"}, {"kind": "regression"},
                                        {"kind": "new"}]
    [cost] = noise_levers.case_costs(document)
    assert cost == {"nodeid": "t.py::test_x", "seconds": 8.0, "pairs_per_stage": [16], "settled": 2, "judged": 4}
    saved = tmp_path / "levers.json"
    few = {**cost, "seconds": 5.0, "settled": 1}
    saved.write_text(json.dumps({"world_sizes": {"4": [{"setting": "base", "stages": [], "cases": [cost, cost]},
                                                       {"setting": "few-rounds", "stages": [], "cases": [few]}]}}))
    done = run_study(noise_levers.main, capsys, "--summarize", str(saved))
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        "world size 4, base: 16 s of block pairs over 2 case runs, 4 of 8 judged figures settled",
        "world size 4, few-rounds: 5 s of block pairs over 1 case runs, 1 of 4 judged figures settled"]


def test_every_figure_asked_for_is_estimated_per_stage() -> None:
    document = _document(order_effect=0.0)
    stage = document["cases"][0]["extra"]["paired"]["block_medians"][0]
    stage["a"]["cpu_time_s"] = [x * 0.4 for x in stage["a"]["step_time_s"]]
    stage["b"]["cpu_time_s"] = [x * 0.4 for x in stage["b"]["step_time_s"]]
    rows = stage_noise(document, ("step_time_s", "cpu_time_s", "epoch_time_s"))
    assert [(r["metric"], r["nodeid"]) for r in rows] == [("step_time_s", "t.py::test_x"),
                                                         ("cpu_time_s", "t.py::test_x")]
    assert rows[0]["plain"] == pytest.approx(rows[1]["plain"])  # the same ratios, scaled


def test_the_shipped_cases_need_a_selection(capsys: pytest.CaptureFixture[str]) -> None:
    done = run_study(noise_levers.main, capsys, "--shipped")
    assert done.returncode == 2 and "--shipped needs -k EXPR" in done.stderr


def test_an_aa_clone_runs_the_same_code_as_its_parent(tmp_path: Path) -> None:
    from studies.scratch_repo import aa_clone, commits_of, git

    source = tmp_path / "source"
    (source / "bench_cases").mkdir(parents=True)
    commits_of(source, {"first": {"lib.py": "X = 1\n", "bench_cases/__init__.py": ""},
                        "second": {"lib.py": "X = 2\n"}})
    clone = aa_clone(source, tmp_path / "clone")
    assert git(clone, "rev-parse", "HEAD~1") == git(source, "rev-parse", "HEAD")
    changed = git(clone, "diff", "HEAD~1", "HEAD").splitlines()
    # one added comment line, in a file of no code: the two sides run the same code
    assert [line for line in changed if line[:1] in "+-" and line[:3] not in ("+++", "---")] == [
        "+", "+# A/A: a comment-only change"]
    assert (clone / "lib.py").read_text() == "X = 2\n"


@pytest.mark.slow
def test_one_session_of_one_setting(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "levers.json"
    done = run_study(noise_levers.main, capsys, "--world-sizes", "2", "--settings", "base", "--iterations", "1",
                     "--cases", "1", "--out", str(out))
    assert done.returncode == 0, done.stderr
    [session] = json.loads(out.read_text())["world_sizes"]["2"]
    assert session["setting"] == "base" and session["stages"], session
    assert session["cases"] and all(case["judged"] and case["seconds"] > 0 for case in session["cases"]), session
