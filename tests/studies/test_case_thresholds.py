"""``studies/case_thresholds.py``: each case's threshold follows its measured noise, and the file it writes is one
``--dmlbench-case-thresholds`` reads."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from pytest_dmlbench.config.case_thresholds import load_case_thresholds
from studies import case_thresholds


def _recording(path: Path) -> Path:
    """An A/A night of three cases: quiet wall and CPU time (1 % a pair), noisy wall time (12 %), and a case
    whose two sides sit 6 % apart (an offset between worlds) with quiet pairs."""
    rng = random.Random(7)
    pairs = 24

    def stage(wall_noise: float, offset: float, cpu: bool) -> dict[str, object]:
        a = {"step_time_s": [0.01 * (1 + offset) * rng.lognormvariate(0, wall_noise) for _ in range(pairs)]}
        b = {"step_time_s": [0.01 * rng.lognormvariate(0, wall_noise) for _ in range(pairs)]}
        if cpu:
            a["cpu_time_s"] = [0.004 * rng.lognormvariate(0, 0.005) for _ in range(pairs)]
            b["cpu_time_s"] = [0.004 * rng.lognormvariate(0, 0.005) for _ in range(pairs)]
        return {"a_first": [i % 2 == 0 for i in range(pairs)], "a": a, "b": b}

    def case(name: str, wall_noise: float, offset: float, cpu: bool) -> dict[str, object]:
        metrics = {"step_time_s": {"unit": "s", "better": "lower"}}
        if cpu:
            metrics["cpu_time_s"] = {"unit": "s", "better": "lower"}
        return {"nodeid": f"t.py::{name}", "world_size": 4, "threshold_pct": None, "metrics": metrics,
                "extra": {"paired": {"block_medians": [stage(wall_noise, offset, cpu)], "seconds": 24.0,
                                     "budget_s": 60.0}}}

    cases = [case("quiet", 0.01, 0.0, True), case("noisy", 0.12, 0.0, False), case("offset", 0.01, 0.06, False)]
    path.write_text(json.dumps({"run": {"threshold_pct": 10, "cpu_threshold_pct": 2.5}, "cases": cases}))
    return path


def test_thresholds_follow_each_case_s_noise_and_the_file_is_readable(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "thresholds.json"
    assert case_thresholds.main([str(_recording(tmp_path / "night.json")), "--nights", "6", "--whole-nights", "3",
                                 "--jobs", "1", "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    thresholds = load_case_thresholds(out)
    quiet, noisy, offset = (thresholds.of(f"t.py::{name}") for name in ("quiet", "noisy", "offset"))
    # 1 % a pair settles at the wall grid's smallest, and CPU time (0.5 % a block) far below the nightly's 10 %
    assert quiet.threshold_pct == 2.5, printed
    assert isinstance(quiet.cpu_threshold_pct, float) and quiet.cpu_threshold_pct <= 1.5, printed
    assert noisy.threshold_pct is not None and noisy.threshold_pct >= 10, printed  # 12 % a pair
    assert noisy.cpu_threshold_pct is None  # no CPU time recorded, none written
    # an offset between the sides is not noise: no threshold it exceeds can prove it unchanged
    assert offset.threshold_pct is not None and offset.threshold_pct > 6, printed
    entry = json.loads(out.read_text())["cases"]["t.py::quiet"]["measured"]
    assert entry["noise_pct"]["step_time_s"] < 3 and entry["settled_share"] >= 0.9
    assert entry["smallest_caught_pct"] is not None and entry["at_defaults"]["settled_share"] >= 0.9
    assert "whole nights at per-case thresholds: 0 of 3 red for nothing" in printed


def test_recordings_that_are_not_paired_runs_are_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    plain = tmp_path / "plain.json"
    plain.write_text(json.dumps({"run": {}, "cases": [{"nodeid": "t.py::x", "metrics": {}}]}))
    assert case_thresholds.main([str(plain)]) == 2
    assert "no case records block pairs" in capsys.readouterr().err


def test_runs_recorded_before_a_figure_are_left_out_so_it_can_settle(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    new = json.loads(_recording(tmp_path / "new.json").read_text())
    old = json.loads(json.dumps(new))
    for case in old["cases"]:  # the same night as recorded before CPU time was: no cpu_time_s anywhere
        case["metrics"].pop("cpu_time_s", None)
        for stage in case["extra"]["paired"]["block_medians"]:
            stage["a"].pop("cpu_time_s", None)
            stage["b"].pop("cpu_time_s", None)
    (tmp_path / "old.json").write_text(json.dumps(old))
    out = tmp_path / "thresholds.json"
    assert case_thresholds.main([str(tmp_path / "old.json"), str(tmp_path / "new.json"), "--nights", "4",
                                 "--whole-nights", "1", "--jobs", "1", "--out", str(out)]) == 0
    assert "left out: 1 recorded run(s) of a case that lack one of its figures" in capsys.readouterr().out
    quiet = load_case_thresholds(out).of("t.py::quiet")
    assert isinstance(quiet.cpu_threshold_pct, float) and quiet.cpu_threshold_pct <= 1.5  # settled on the new pairs
