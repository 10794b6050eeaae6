"""studies/canary_noise.py estimates each recorded stage both ways, plain and canary-adjusted, from the same pairs."""

from __future__ import annotations

import json
import random
import re
from pathlib import Path

import pytest

from studies import canary_noise
from tests.studies.running import run_study


def _results(path: Path, canary_follows_phase: bool) -> Path:
    rng = random.Random(0)
    a, b, ca, cb = [], [], [], []
    for _ in range(12):
        phase_a, phase_b = rng.uniform(0.8, 1.25), rng.uniform(0.8, 1.25)
        a.append(0.01 * phase_a * rng.gauss(1, 0.01))
        b.append(0.01 * phase_b * rng.gauss(1, 0.01))
        ca.append(0.003 * (phase_a if canary_follows_phase else 1.0) * rng.gauss(1, 0.005))
        cb.append(0.003 * (phase_b if canary_follows_phase else 1.0) * rng.gauss(1, 0.005))
    stage = {"a_first": [True] * 12, "a": {"step_time_s": a}, "b": {"step_time_s": b}, "canary": {"a": ca, "b": cb}}
    path.write_text(json.dumps({"cases": [{
        "nodeid": "t.py::test_x", "world_size": 4,
        "metrics": {"step_time_s": {"unit": "s", "better": "lower"}, "peak_rss_mb": {"unit": "MB", "better": "lower"}},
        "extra": {"paired": {"block_medians": [stage]}}}]}))
    return path


def _medians(output: str) -> tuple[float, float]:
    found = re.search(r"per-pair noise: plain ([\d.]+) %, adjusted ([\d.]+) %", output)
    assert found, output
    return float(found[1]), float(found[2])


def test_a_canary_that_follows_the_phases_lowers_the_noise(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    done = run_study(canary_noise.main, capsys, str(_results(tmp_path / "phased.json", canary_follows_phase=True)))
    assert done.returncode == 0, done.stderr
    plain, adjusted = _medians(done.stdout)
    assert adjusted < plain / 5, done.stdout
    assert "world size 4: 1 stages (1 cases, median 12 pairs)" in done.stdout
    assert "narrowed the test in 1 of 1 stages" in done.stdout
    # negative control: a canary that saw none of the phases leaves the noise where it was
    blind = run_study(canary_noise.main, capsys, str(_results(tmp_path / "blind.json", canary_follows_phase=False)))
    assert blind.returncode == 0, blind.stderr
    plain, adjusted = _medians(blind.stdout)
    assert adjusted > plain * 0.8, blind.stdout


def test_results_without_a_canary_are_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    old = tmp_path / "old.json"
    old.write_text(json.dumps({"cases": [{"nodeid": "t", "metrics": {}, "extra": {"paired": {"block_medians": [
        {"a_first": [True], "a": {}, "b": {}}]}}}]}))
    done = run_study(canary_noise.main, capsys, str(old))
    assert done.returncode == 2
    assert "no stage with a recorded canary and at least 8 pairs" in done.stderr
    broken = tmp_path / "broken.json"
    broken.write_text("{")
    assert "broken.json: not a readable results file" in run_study(canary_noise.main, capsys, str(broken)).stderr
