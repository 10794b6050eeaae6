"""``studies/replay_nights.py``: recorded A/A nights replayed through the gate's trial, with the settled share."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from studies import replay_nights


def _night(path: Path, memory: bool) -> Path:
    pairs = 12
    a = {"step_time_s": [0.010 * (1 + 0.01 * (i % 3)) for i in range(pairs)]}
    b = {"step_time_s": [0.010 * (1 + 0.01 * (i % 2)) for i in range(pairs)]}
    metrics = {"step_time_s": {"unit": "s", "better": "lower"}}
    if memory:
        a["peak_rss_mb"], b["peak_rss_mb"] = [500.0] * pairs, [501.0] * pairs
        metrics["peak_rss_mb"] = {"unit": "MB", "better": "lower"}
    stage = {"a_first": [i % 2 == 0 for i in range(pairs)], "a": a, "b": b}
    cases = [{"nodeid": f"t.py::test_{i}", "world_size": 2, "threshold_pct": None, "metrics": metrics,
              "extra": {"paired": {"block_medians": [stage], "seconds": 12.0, "budget_s": 60.0}}} for i in range(3)]
    path.write_text(json.dumps({"run": {"threshold_pct": 10}, "cases": cases}))
    return path


def test_a_replay_reports_the_settled_share_and_names_what_old_recordings_lack(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    old = _night(tmp_path / "old.json", memory=False)
    assert replay_nights.main([str(old), "--nights", "3", "--slowdowns", ""]) == 0
    out = capsys.readouterr().out
    assert "unchanged code: 0 of 3 nights red" in out
    assert "settled share of the judged figures: median 100.0 %" in out  # 1 % noise: every figure proven
    assert ("not in these recordings: collective_calls_per_step, comm_bytes_per_step, flops_per_step, peak_cuda_mb, "
            "peak_rss_mb") in out
    new = _night(tmp_path / "new.json", memory=True)
    assert replay_nights.main([str(new), "--nights", "3", "--slowdowns", ""]) == 0
    out = capsys.readouterr().out
    assert "peak_rss_mb" not in out.split("not in these recordings:")[-1].split("\n")[0]  # recorded, so replayed
    # a memory peak on kept worlds is never proven within 10 %: the settled share shows it
    assert "settled share of the judged figures: median 50.0 %" in out


def test_a_replay_under_another_cpu_threshold_judges_the_recorded_cpu_pairs_or_leaves_them_out(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    night = json.loads(_night(tmp_path / "n.json", memory=False).read_text())
    night["run"]["cpu_threshold_pct"] = 2.5
    for case in night["cases"]:
        case["metrics"]["cpu_time_s"] = {"unit": "s", "better": "lower"}
        stage = case["extra"]["paired"]["block_medians"][0]
        # CPU time 20 % noisier than 2.5 allows: unproven at 2.5 %, proven at 50 %
        stage["a"]["cpu_time_s"] = [0.004 * (1 + 0.2 * (i % 2)) for i in range(12)]
        stage["b"]["cpu_time_s"] = [0.004 * (1 + 0.2 * ((i + 1) % 2)) for i in range(12)]
    path = tmp_path / "cpu.json"
    path.write_text(json.dumps(night))
    shares = {}
    for cpu in (None, "50", "off"):
        assert replay_nights.main([str(path), "--nights", "2", "--slowdowns", "",
                                   *(("--cpu-threshold", cpu) if cpu else ())]) == 0
        out = capsys.readouterr().out
        shares[cpu] = out.split("settled share of the judged figures: median ")[1].split(" %")[0]
        assert (f"CPU threshold {cpu}" in out) == (cpu is not None)
    assert shares == {None: "50.0", "50": "100.0", "off": "100.0"}  # at the recorded 2.5 %, CPU time is unsettled
    with pytest.raises(SystemExit):
        replay_nights.main([str(path), "--cpu-threshold", "fast"])
    assert "or off to leave CPU time unjudged" in capsys.readouterr().err
