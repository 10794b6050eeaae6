"""The nightly history store: round trip, atomic appends, and clear messages for missing or corrupt files."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from pytest_dmlbench.drift.history import (
    append_night,
    load_history,
    night_from_results,
    paired_ratio,
    series,
)
from pytest_dmlbench.errors import HistoryError
from tests.drift.nights import NODEID, night_results


def test_a_night_round_trips_with_its_medians_and_paired_ratio(tmp_path: Path) -> None:
    results = night_results(3, 1.0, "ab" * 20, ratio=1.05)
    night = night_from_results(results, ref="HEAD~1")
    path = append_night(tmp_path / "history", night)
    assert path.parent == tmp_path / "history" and path.name == "night-20261103T031700-abababababab.json"
    [loaded] = load_history(tmp_path / "history")
    assert loaded == night
    step = loaded.points[(NODEID, "step_time_s")]
    assert step.median == pytest.approx(results.cases[0].metrics["step_time_s"].stats.median)
    assert step.better == "lower" and step.unit == "s" and step.ratio == pytest.approx(1.05)
    assert loaded.points[(NODEID, "throughput_samples_per_s")].better == "higher"
    assert (NODEID, "compute_comm_ratio") not in loaded.points  # informational: never judged
    assert (loaded.commit, loaded.ref, loaded.ref_commit) == ("ab" * 20, "HEAD~1", "f" * 40)
    assert [p.median for _, p in series([loaded], (NODEID, "step_time_s"))] == [step.median]


def test_the_paired_ratio_is_the_geometric_mean_of_the_block_pairs() -> None:
    extra = {"paired": {"block_medians": [{"a": {"m": [2.0, 1.0]}, "b": {"m": [1.0, 2.0]}},
                                          {"a": {"m": [4.0]}, "b": {"m": [1.0]}}]}}
    assert paired_ratio(extra, "m") == pytest.approx(math.exp(math.log(4.0) / 3))
    assert paired_ratio(extra, "other") is None
    assert paired_ratio({}, "m") is None


def test_nights_load_oldest_first_and_no_temp_file_is_left(tmp_path: Path) -> None:
    for day in (5, 2, 9):
        append_night(tmp_path, night_from_results(night_results(day, 1.0, f"{day:02x}" * 20)))
    assert [n.date[:10] for n in load_history(tmp_path)] == ["2026-11-02", "2026-11-05", "2026-11-09"]
    assert sorted(p.name[:6] for p in tmp_path.iterdir()) == ["night-"] * 3


def test_a_night_is_never_recorded_twice_nor_replaced(tmp_path: Path) -> None:
    night = night_from_results(night_results(4, 1.0, "cd" * 20))
    path = append_night(tmp_path, night)
    before = path.read_bytes()
    with pytest.raises(HistoryError, match="already recorded; nothing was written"):
        append_night(tmp_path, night_from_results(night_results(4, 2.0, "cd" * 20)))
    assert path.read_bytes() == before


def test_a_corrupt_night_is_named_with_the_fix_and_nothing_is_lost(tmp_path: Path) -> None:
    good = append_night(tmp_path, night_from_results(night_results(1, 1.0, "01" * 20)))
    bad = tmp_path / "night-20261102T031700-020202020202.json"
    bad.write_text('{"schema": 1, "kind": "dmlbench-nightly-history", "commit": "02", "da')
    stored = good.read_bytes(), bad.read_bytes()
    with pytest.raises(HistoryError) as caught:
        load_history(tmp_path)
    message = str(caught.value)
    assert message.startswith(f"{bad}: unusable night file (JSONDecodeError")
    assert f"The other nights are intact: move this file out of {tmp_path}" in message
    assert (good.read_bytes(), bad.read_bytes()) == stored
    append_night(tmp_path, night_from_results(night_results(3, 1.0, "03" * 20)))  # appending reads no night
    bad.unlink()
    assert len(load_history(tmp_path)) == 2


def test_a_file_of_another_kind_is_refused_by_name(tmp_path: Path) -> None:
    other = tmp_path / "night-x.json"
    other.write_text('{"schema": 2, "cases": []}')
    with pytest.raises(HistoryError, match=r"night-x.json: unusable night file \(ValueError: not a night of schema 1"):
        load_history(tmp_path)


def test_a_missing_history_says_how_to_start_one(tmp_path: Path) -> None:
    with pytest.raises(HistoryError) as caught:
        load_history(tmp_path / "none")
    assert str(caught.value) == (
        f"{tmp_path / 'none'}: no nightly history there (no such folder). Record a night first: "
        f"python -m pytest_dmlbench drift record RESULTS.json --history {tmp_path / 'none'}")
    (tmp_path / "file").write_text("x")
    with pytest.raises(HistoryError, match="the history path is a file, not a folder"):
        append_night(tmp_path / "file", night_from_results(night_results(1, 1.0, "01" * 20)))
