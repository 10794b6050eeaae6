"""ci/suite_live_check.py end to end on a small temporary repository: the quiet night stays green and the
slowed case is caught alone, through real paired sessions (the script's own figures come from its full run,
reported in ci/README.md)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tests.conftest import clean_env

SCRIPT = Path(__file__).resolve().parents[2] / "ci" / "suite_live_check.py"


def test_a_quiet_night_stays_green_and_the_slowed_case_alone_turns_red(tmp_path: Path) -> None:
    # case 0 does 3x the work; a 50 % threshold keeps a loaded machine from flipping either night
    out = tmp_path / "live.json"
    done = subprocess.run(
        [sys.executable, str(SCRIPT), "--world-sizes", "2", "--iterations", "1", "--cases", "3", "--slowdown", "2.0",
         "--extra=--dmlbench-threshold=50", "--out", str(out), "--keep-results", str(tmp_path / "nights")],
        capture_output=True, text=True, timeout=1200, env=clean_env(), cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    nights = {n["way"]: n for n in json.loads(out.read_text())["world_sizes"]["2"]}
    assert nights["aa"]["exit"] == 0 and nights["aa"]["failed"] == []
    assert nights["aa"]["plain_s"] > 0
    assert nights["one_slow"]["exit"] == 1
    assert [f.split("::", 1)[1] for f in nights["one_slow"]["failed"]] == ["test_step[0]"]
    assert nights["one_slow"]["slowed_kind"] == "regression" and nights["one_slow"]["slowed_ratio"] > 2.0
    assert sorted(p.name for p in (tmp_path / "nights").iterdir()) == ["aa-ws2-0.json", "one_slow-ws2-0.json"]
    assert "1 quiet nights, 1 green; 1 nights with case 0 slowed: caught in 1, and alone (nothing else red) in 1; " \
           "unchanged items failed: 0" in done.stdout
