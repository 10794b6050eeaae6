"""``studies/memory_world_offset.py``: the A/A offset of memory peaks between two sides' worlds, from recordings."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from pytest_dmlbench.gates.paired.memory_peaks import WORLD_OFFSET_PCT
from studies import memory_world_offset


def _night(path: Path, pairs: list[tuple[float, float]]) -> Path:
    cases = [{"nodeid": f"t.py::test_{i}", "verdicts": [
        {"metric": "peak_rss_mb", "baseline_median": b, "current_median": a},
        {"metric": "step_time_s", "baseline_median": 1.0, "current_median": 9.0}]} for i, (a, b) in enumerate(pairs)]
    path.write_text(json.dumps({"cases": cases}))
    return path


def test_the_offset_is_read_either_way_on_the_log_scale(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    night = _night(tmp_path / "night.json", [(500.0, 500.0), (550.0, 500.0), (400.0, 500.0)])
    assert memory_world_offset.offsets(night, "peak_rss_mb") == pytest.approx([0.0, 10.0, -25.0])
    assert memory_world_offset.main([str(night)]) == 0
    out = capsys.readouterr().out
    assert "largest A/A offset of peak_rss_mb between two sides' worlds: 25.0 % over 3 readings" in out
    assert "step_time_s" not in out  # negative control: another figure's medians are not read as memory


def test_the_gate_allows_for_the_largest_offset_the_kept_recordings_give(capsys: pytest.CaptureFixture[str]) -> None:
    assert memory_world_offset.main([]) == 0
    out = capsys.readouterr().out
    # The count of readings grows with every kept night; the largest offset must stay the gate's allowance.
    assert re.search(rf"between two sides' worlds: {WORLD_OFFSET_PCT:.1f} % over \d+ readings", out), out


def test_an_unreadable_file_is_named(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "bad.json.gz"
    bad.write_bytes(b"not gzip")
    assert memory_world_offset.main([str(bad)]) == 2
    assert "bad.json.gz: not a readable results file" in capsys.readouterr().err
