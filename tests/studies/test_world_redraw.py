"""studies/world_redraw.py's summary on results files written here: pairs are split into worlds where a pair ran on
fresh ones, an offset each world draws is found between worlds, and noise alone gives none (the control that
shows the estimate is not always large). One live session (a clone of this repository, a collective) daily."""

from __future__ import annotations

import json
import math
import random
from pathlib import Path
from typing import Any

import pytest

from studies import world_redraw
from studies.world_redraw import case_worlds, summarize, world_spread, world_variance
from tests.studies.running import run_study

CASES, PAIRS, REDRAW, NOISE = 40, 24, 3, 0.03


def document(rng: random.Random, world_offset: float) -> dict[str, Any]:
    """A session's results: per case, 24 pairs in two stages, worlds redrawn every 3 pairs, each world adding
    an offset drawn with sd ``world_offset`` to the log ratio A/B, plus noise."""
    cases = []
    for k in range(CASES):
        fresh = [n > 0 and n % REDRAW == 0 for n in range(PAIRS)]
        shift = 0.0
        a: list[float] = []
        b: list[float] = []
        for new in fresh:
            if new or not a:
                shift = rng.gauss(0, world_offset)
            b.append(0.01 * math.exp(rng.gauss(0, 0.05)))
            a.append(b[-1] * math.exp(shift + rng.gauss(0, NOISE)))
        stages = [{"a": {"step_time_s": a[:10]}, "b": {"step_time_s": b[:10]}, "fresh_world": fresh[:10]},
                  {"a": {"step_time_s": a[10:]}, "b": {"step_time_s": b[10:]}, "fresh_world": fresh[10:]}]
        cases.append({"nodeid": f"test_x.py::test_case[{k}]",
                      "extra": {"paired": {"seconds": 12.0, "pairs_per_stage": [10, 14], "block_medians": stages}}})
    return {"cases": cases, "session_note": {"redraw": REDRAW, "wall_s": 100.0}}


def spread(world_offset: float) -> float:
    worlds = case_worlds(document(random.Random(3), world_offset))
    components = [c for ws in worlds.values() if (c := world_variance(ws)) is not None]
    assert len(components) == CASES
    return world_spread(components, random.Random(0))[0]


def test_pairs_are_split_into_worlds_where_fresh_ones_started_across_stages() -> None:
    worlds = case_worlds(document(random.Random(1), 0.0))
    assert [len(w) for w in worlds["test_x.py::test_case[0]"]] == [3] * 8


def test_an_offset_each_world_draws_is_found_between_worlds() -> None:
    # 40 cases of 8 worlds bound the sampling error of a 6 % spread to about 1 %
    assert 4.5 < spread(0.06) < 7.5


def test_noise_alone_gives_no_world_offset() -> None:
    assert spread(0.0) < 1.5


def test_the_summary_names_both_offsets(tmp_path: Path) -> None:
    path = tmp_path / "session1-redraw3.json"
    path.write_text(json.dumps(document(random.Random(5), 0.06)))
    lines = summarize([path])
    assert lines[0].startswith("session1-redraw3.json: redraw every 3 pair(s), 100 s, 40 cases of 8+ pairs")
    assert "kept for a whole case (halves): 40 cases" in lines[1]
    assert "kept by one world (between worlds, 40 cases, median 8 worlds a case): spread" in lines[2]


def test_a_session_with_kept_worlds_gets_the_control_on_consecutive_pairs(tmp_path: Path) -> None:
    """Without fresh worlds the pairs are one world; grouped in twos, noise alone reads about zero."""
    kept = document(random.Random(5), 0.0)
    for case in kept["cases"]:
        for stage in case["extra"]["paired"]["block_medians"]:
            del stage["fresh_world"]
    kept["session_note"]["redraw"] = 0
    path = tmp_path / "session0-redraw0.json"
    path.write_text(json.dumps(kept))
    lines = summarize([path])
    assert len(lines) == 3 and "kept by one world" not in "".join(lines)
    assert lines[2].startswith("  control, consecutive pairs of one kept world in groups of 2 (40 cases): spread")
    assert float(lines[2].split("spread ")[1].split(" %")[0]) < 1.5


@pytest.mark.slow
def test_one_live_session_with_kept_worlds(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A clone of this repository's HEAD with a comment-only commit, one A/A session of one collective."""
    done = run_study(world_redraw.main, capsys, "--select",
                     "bench_cases/test_collectives.py::test_collective_bandwidth[all_reduce-4KB]", "--settings", "0",
                     "--threshold", "50", "--pair-budget", "3", "--out-dir", str(tmp_path))
    assert done.returncode == 0, done.stderr
    session = json.loads((tmp_path / "session0-redraw0.json").read_text())
    assert session["session_note"]["redraw"] == 0 and session["session_note"]["exit"] == 0
    assert done.stdout.splitlines()[0].startswith("session 0: redraw 0, ")
