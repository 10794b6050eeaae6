"""``studies/cpu_noise.py``: CPU time's per-pair noise against wall time's, on the same recorded block pairs."""

from __future__ import annotations

import json
import math
import random
from pathlib import Path

import pytest

from studies import cpu_noise


def _run(path: Path, wall_sd: float, cpu_sd: float, pairs: int = 30) -> Path:
    rng = random.Random(7)
    a: dict[str, list[float]] = {"step_time_s": [], "cpu_time_s": []}
    b: dict[str, list[float]] = {"step_time_s": [], "cpu_time_s": []}
    for _ in range(pairs):
        for side in (a, b):
            side["step_time_s"].append(0.01 * math.exp(rng.gauss(0, wall_sd / math.sqrt(2))))
            side["cpu_time_s"].append(0.004 * math.exp(rng.gauss(0, cpu_sd / math.sqrt(2))))
    stage = {"a_first": [True] * pairs, "a": a, "b": b}
    case = {"nodeid": "t.py::test_step", "world_size": 4, "extra": {"paired": {"block_medians": [stage]}}}
    path.write_text(json.dumps({"cases": [case, {"nodeid": "t.py::test_untimed", "world_size": 4}]}))
    return path


def test_each_figure_s_noise_is_read_from_the_same_pairs(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    results = _run(tmp_path / "r.json", wall_sd=0.20, cpu_sd=0.02)
    (row,) = cpu_noise.case_rows(json.loads(results.read_text()))
    assert row[cpu_noise.WALL][0] == row[cpu_noise.CPU][0] == 30
    assert 14 < row[cpu_noise.WALL][1] < 28 and 1.4 < row[cpu_noise.CPU][1] < 2.8  # about 20 % and 2 %
    assert cpu_noise.main([str(results)]) == 0
    assert "world size 4: 1 cases; median per-pair noise wall" in capsys.readouterr().out


def test_a_run_without_cpu_pairs_is_named(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bare = tmp_path / "bare.json"
    bare.write_text(json.dumps({"cases": [{"nodeid": "t.py::test_a", "world_size": 2}]}))
    assert cpu_noise.main([str(bare)]) == 1
    assert "--dmlbench-cpu-threshold" in capsys.readouterr().err
    broken = tmp_path / "broken.json"
    broken.write_text("{not json")
    assert cpu_noise.main([str(broken)]) == 2
