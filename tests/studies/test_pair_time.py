"""``studies/pair_time.py``: where a paired run's block pairs spent their time, and what it settled."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from studies import pair_time


def _verdict(metric: str, kind: str, pairs: int) -> dict[str, object]:
    return {"metric": metric, "kind": kind, "paired": {"pairs": pairs}}


def _results(path: Path) -> Path:
    cases = [
        {"nodeid": "t.py::test_step", "extra": {"paired": {"seconds": 30.0}},
         "verdicts": [_verdict("step_time_s", "unchanged", 6), _verdict("cpu_time_s", "inconclusive", 6),
                      _verdict("peak_rss_mb", "inconclusive", 6), _verdict("flops_per_step", "new", 0)]},
        {"nodeid": "t.py::test_memory", "extra": {"paired": {"seconds": 70.0}},
         "verdicts": [_verdict("peak_rss_mb", "inconclusive", 4)]},
        {"nodeid": "t.py::test_unpaired", "extra": {}, "verdicts": []},
    ]
    path.write_text(json.dumps({"cases": cases}))
    return path


def test_cases_are_listed_heaviest_first_with_what_they_settled(tmp_path: Path,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    rows = pair_time.case_pairs(json.loads(_results(tmp_path / "r.json").read_text()))
    assert [(r.nodeid, r.seconds, r.pairs, r.settled, r.judged, r.memory_only) for r in rows] == [
        ("t.py::test_memory", 70.0, 4, 0, 1, True),
        ("t.py::test_step", 30.0, 6, 1, 3, False),  # `new` is not judged; a peak beside timings is not memory-only
    ]
    assert pair_time.main([str(tmp_path / "r.json")]) == 0
    out = capsys.readouterr().out
    assert "2 cases ran block pairs for 100 s" in out
    assert "cases whose judged figures are all memory peaks: 1, 70 s of pairs (70.0 %), 0 of 1 figures settled" in out


def test_a_run_without_pairs_and_an_unreadable_file_are_named(tmp_path: Path,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    bare = tmp_path / "bare.json"
    bare.write_text(json.dumps({"cases": [{"nodeid": "t.py::test_a", "extra": {}}]}))
    assert pair_time.main([str(bare)]) == 1
    assert "holds no case with block pairs" in capsys.readouterr().err
    broken = tmp_path / "broken.json.gz"
    broken.write_bytes(b"not gzip")
    assert pair_time.main([str(broken)]) == 2
    assert "not a readable results file" in capsys.readouterr().err
    cut = tmp_path / "cut.json.gz"  # a recording cut short: gzip raises EOFError, not OSError
    cut.write_bytes(gzip.compress(bare.read_bytes())[:-12])
    assert pair_time.main([str(cut)]) == 2
    assert "cut.json.gz: not a readable results file" in capsys.readouterr().err
