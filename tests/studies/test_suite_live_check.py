"""studies/suite_live_check.py end to end on a small temporary repository: the quiet night stays green and the
slowed cases are caught and nothing else, through real paired sessions (the script's own figures come from its
full runs, reported in docs/evidence/run-logs.md).

Both live runs are marked ``slow`` and run daily (``.github/workflows/slow-tests.yml``): the check of four cases
at the default pair budget takes minutes on a loaded 2-core machine, and even its smoke (two cases, one slowed,
pairs bounded by a 10 s budget) costs about 85 s of CPU in three real sessions. Every CI run keeps what needs no
session: the repository the nights run in, the summary and the refused options."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from studies import suite_live_check
from studies.scratch_repo import git
from tests.studies.running import run_study


def live_check(tmp_path: Path, capsys: pytest.CaptureFixture[str], cases: int, slowed: int,
               *extra: str) -> tuple[dict[str, Any], str]:
    """One quiet night and one night with cases ``0..slowed-1`` doing 3x the work, at world size 2; a 50 %
    threshold keeps a loaded machine from flipping either night. The nights by way, and what was printed."""
    out = tmp_path / "live.json"
    done = run_study(suite_live_check.main, capsys, "--world-sizes", "2", "--iterations", "1", "--cases", str(cases),
                     "--slowed", str(slowed), "--slowdown", "2.0", "--extra=--dmlbench-threshold=50", *extra,
                     "--out", str(out), "--keep-results", str(tmp_path / "nights"))
    assert done.returncode == 0, done.stdout + done.stderr
    nights = {n["way"]: n for n in json.loads(out.read_text())["world_sizes"]["2"]}
    assert nights["aa"]["exit"] == 0 and nights["aa"]["failed"] == []
    assert nights["aa"]["plain_s"] > 0
    assert nights["one_slow"]["exit"] == 1
    ids = [f"test_cases.py::test_step[{k}]" for k in range(slowed)]
    assert [f.split("/")[-1] for f in nights["one_slow"]["failed"]] == ids  # the slowed cases and nothing else
    found = nights["one_slow"]["slowed"]
    assert sorted(found) == ids
    assert all(s["kind"] == "regression" and s["ratio"] > 2.0 and s["estimate"] > 2.0 for s in found.values())
    assert sorted(p.name for p in (tmp_path / "nights").iterdir()) == ["aa-ws2-0.json", "one_slow-ws2-0.json"]
    assert f"1 quiet nights, 1 green; 1 nights with slowed cases: {slowed} of {slowed} slowed cases caught (100 %); " \
           "nights with nothing else red: 1; unchanged items failed: 0" in done.stdout
    return nights, done.stdout


@pytest.mark.slow
def test_smoke_a_quiet_night_stays_green_and_the_slowed_case_alone_turns_red(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    live_check(tmp_path, capsys, 2, 1, "--extra=--dmlbench-pair-budget=10")


@pytest.mark.slow
def test_a_quiet_night_stays_green_and_the_slowed_cases_alone_turn_red(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    live_check(tmp_path, capsys, 4, 2)


def test_the_summary_counts_each_slowed_case(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A night of two slowed cases with one missed and an unchanged case red, and a night of one slowed case
    caught alone: 2 of 3 caught, one night with something else red, one false red."""
    two = {"test_cases.py::test_step[0]": {"kind": "regression", "ratio": 1.12, "estimate": 1.13},
           "test_cases.py::test_step[1]": {"kind": "unchanged", "ratio": 1.08, "estimate": 1.09}}
    report = {"world_sizes": {"4": [
        {"way": "aa", "exit": 0, "failed": [], "wall_s": 10.0, "plain_s": 8.0},
        {"way": "one_slow", "exit": 1, "wall_s": 12.0, "slowed": two,
         "failed": ["r/test_cases.py::test_step[0]", "r/test_cases.py::test_step[5]"]},
        {"way": "one_slow", "exit": 1, "wall_s": 12.0, "failed": ["r/test_cases.py::test_step[0]"],
         "slowed": {"test_cases.py::test_step[0]": {"kind": "regression", "ratio": 1.11, "estimate": None}}},
    ]}}
    (tmp_path / "nights.json").write_text(json.dumps(report))
    done = run_study(suite_live_check.main, capsys, "--summarize", str(tmp_path / "nights.json"))
    assert done.returncode == 0, done.stderr
    assert "2 nights with slowed cases: 2 of 3 slowed cases caught (67 %); nights with nothing else red: 1; " \
           "unchanged items failed: 1" in done.stdout
    assert "paired estimates: 1.090, 1.130" in done.stdout  # the third verdict recorded none
    assert "ratios of medians: 1.080, 1.110, 1.120" in done.stdout


@pytest.mark.parametrize("slowed", ["0", "24"])
def test_slowed_must_leave_cases_unchanged(capsys: pytest.CaptureFixture[str], slowed: str) -> None:
    done = run_study(suite_live_check.main, capsys, "--cases", "24", "--slowed", slowed)
    assert done.returncode == 2
    assert f"--slowed {slowed}: give 1 to 23, so that some cases stay unchanged" in done.stderr


def test_the_nights_repository_slows_the_first_cases_alone(tmp_path: Path) -> None:
    commits = suite_live_check.build_repo(tmp_path, cases=3, slowdown=0.5, slowed=2)
    assert list(commits) == ["base", "aa", "one_slow"]

    def library(name: str) -> str:
        return git(tmp_path, "show", f"{commits[name]}:lib.py")

    changed = [(a, b) for a, b in zip(library("base").splitlines(), library("aa").splitlines(), strict=True) if a != b]
    assert changed == [("# base", "# comment changed")]  # the quiet night's change is a comment only
    slow = library("one_slow")
    assert slow.count("range(60)") == 2 and slow.count("range(40)") == 1  # cases 0 and 1 do 50 % more work
    assert "range(60)" not in library("base")
    assert "def step_2(x):\n    for _ in range(40):" in slow
