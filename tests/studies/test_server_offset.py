"""studies/server_offset.py on results files written here: an offset each run's servers draw per case is found within
the run and not across runs, an offset that belongs to the case is found across runs, and noise alone gives
no offset (the control that shows the estimate is not always large); the count of cases beyond 2 standard errors
matches the t distribution's on noise alone and rises with offsets that differ from case to case."""

from __future__ import annotations

import gzip
import json
import math
import random
from pathlib import Path

import pytest

from studies import server_offset
from studies.server_offset import beyond, case_logs, halves, shared_offset
from tests.studies.running import run_study

CASES, PAIRS, NOISE = 60, 16, 0.03


def write_run(path: Path, rng: random.Random, run_offset: float, case_offsets: list[float]) -> None:
    """A paired run's results file: each case's pairs A/B of step_time_s with log ratio ``run offset drawn per
    case`` + ``the case's own offset`` + noise (B's blocks around 10 ms)."""
    cases = []
    for k in range(CASES):
        shift = rng.gauss(0, run_offset) + case_offsets[k]
        b = [0.01 * math.exp(rng.gauss(0, 0.05)) for _ in range(PAIRS)]
        a = [v * math.exp(shift + rng.gauss(0, NOISE)) for v in b]
        cases.append({"nodeid": f"test_x.py::test_case[{k}]", "world_size": 4,
                      "metrics": {"step_time_s": {"unit": "s", "better": "lower"}},
                      "extra": {"paired": {"seconds": 8.0, "budget_s": 60.0, "block_medians": [
                          {"a_first": [True] * PAIRS, "a": {"step_time_s": a}, "b": {"step_time_s": b}}]}}})
    path.write_bytes(gzip.compress(json.dumps({"run": {"threshold_pct": 10.0}, "cases": cases}).encode()))


def runs(tmp_path: Path, run_offset: float, case_offset: float) -> list[Path]:
    rng = random.Random(7)
    own = [rng.gauss(0, case_offset) for _ in range(CASES)]
    paths = [tmp_path / f"night{n}.json.gz" for n in range(2)]
    for path in paths:
        write_run(path, rng, run_offset, own)
    return paths


def within_and_across(paths: list[Path]) -> tuple[float, float]:
    rng = random.Random(0)
    first, second = (case_logs(p, "step_time_s", 8) for p in paths)
    within = shared_offset(halves(first), rng).spread_pct
    across = shared_offset([(sum(first[k]) / PAIRS, sum(second[k]) / PAIRS) for k in first], rng).spread_pct
    return within, across


def test_an_offset_the_servers_draw_per_run_shows_within_a_run_and_not_across(tmp_path: Path) -> None:
    # 60 cases bound the sampling error of a 6 % spread's covariance to about 2 %; half that is the margin
    within, across = within_and_across(runs(tmp_path, run_offset=0.06, case_offset=0.0))
    assert 4.0 < within < 8.0
    assert across < 3.0


def test_an_offset_of_the_case_itself_shows_across_runs(tmp_path: Path) -> None:
    within, across = within_and_across(runs(tmp_path, run_offset=0.0, case_offset=0.06))
    assert 4.0 < within < 8.0 and 4.0 < across < 8.0


def test_noise_alone_gives_no_offset(tmp_path: Path) -> None:
    within, across = within_and_across(runs(tmp_path, run_offset=0.0, case_offset=0.0))
    assert within < 1.0 and across < 1.0


def test_noise_alone_is_beyond_two_standard_errors_as_often_as_the_t_distribution_says(tmp_path: Path) -> None:
    # 60 cases of 16 pairs: the t distribution gives 60 x 0.064 = 3.8; a count of 0-9 is its 99 % range
    seen, expected = beyond(case_logs(runs(tmp_path, run_offset=0.0, case_offset=0.0)[0], "step_time_s", 8), 2.0)
    assert math.isclose(expected, CASES * 0.0639, rel_tol=0.02)
    assert seen <= 9


def test_offsets_that_differ_from_case_to_case_put_more_cases_beyond(tmp_path: Path) -> None:
    # a 3 % offset drawn per case against 3 % noise over 16 pairs: most cases lie beyond 2 standard errors
    seen, expected = beyond(case_logs(runs(tmp_path, run_offset=0.03, case_offset=0.0)[0], "step_time_s", 8), 2.0)
    assert seen > 3 * expected


def test_the_script_prints_both_views_and_its_bounds(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    paths = runs(tmp_path, run_offset=0.04, case_offset=0.0)
    done = run_study(server_offset.main, capsys, *map(str, paths), "--max-noise", "20")
    assert done.returncode == 0, done.stderr
    assert "cases with at least 8 pairs and per-pair noise up to 20 %; within a run" in done.stdout
    assert "night0.json.gz: 60 cases: correlation +0." in done.stdout
    assert "beyond 2 standard errors: " in done.stdout and "(the t distribution gives 3.8)" in done.stdout
    assert "pooled: 120 cases" in done.stdout and "night0.json.gz / night1.json.gz: 60 cases" in done.stdout


@pytest.mark.parametrize(("args", "message"), [
    (["--min-pairs", "3"], "--min-pairs 3: give 4 or more"),
    (["--figure", "step_time_s"], "not a readable results file"),
])
def test_bad_input_is_named(tmp_path: Path, args: list[str], message: str,
                            capsys: pytest.CaptureFixture[str]) -> None:
    broken = tmp_path / "broken.json.gz"
    broken.write_bytes(b"not gzip")
    done = run_study(server_offset.main, capsys, str(broken), *args)
    assert done.returncode == 2
    assert message in done.stderr
