"""The timing validations' verdict rule (bench_cases/test_measurement_validation.py), on a real one-rank
group: a 95 % interval wholly inside the target passes, wholly outside fails on a quiet machine, and is
"not judged" when it straddles a bound or when other work took the machine's CPU (a /proc/stat written
here)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from bench_cases.test_measurement_validation import CONTENDED, measure_until_decided, settle, within
from pytest_dmlbench.errors import NotJudged
from pytest_dmlbench.measure.clock import use_clock
from pytest_dmlbench.measure.contention import ContentionWatch


def watch_with(tmp_path: Path, share: float) -> ContentionWatch:
    """A watch over 10 s (fake clock) in which other work took ``share`` of the machine's CPU time."""
    stat, tick, cores = tmp_path / "stat", os.sysconf("SC_CLK_TCK"), os.cpu_count() or 1
    stat.write_text("cpu  0 0 0 0 0 0 0 0 0 0\n")
    with use_clock(lambda: 0.0):
        watch = ContentionWatch.start(stat)
    stat.write_text(f"cpu  {int(share * cores * 10 * tick)} 0 0 0 0 0 0 0 0 0\n")
    return watch


@pytest.mark.parametrize(("interval", "expected"), [((-1.0, 2.0), True), ((3.5, 9.0), False), ((-9.0, -3.5), False),
                                                    ((1.0, 4.0), None), ((-4.0, 4.0), None)])
def test_within_reads_where_the_interval_lies(interval: tuple[float, float], expected: bool | None) -> None:
    assert within(interval, -3.0, 3.0) is expected


def test_an_interval_inside_the_target_passes(tmp_path: Path, world1: None) -> None:
    with use_clock(lambda: 10.0):
        settle(True, "target", (-1.0, 2.0), {}, watch_with(tmp_path, 0.9))


def test_a_miss_on_a_quiet_machine_fails(tmp_path: Path, world1: None) -> None:
    missed = r"target missed: the 95 % interval \[3\.5, 9\] lies outside it; figures: "
    with use_clock(lambda: 10.0), pytest.raises(pytest.fail.Exception, match=missed):
        settle(False, "target", (3.5, 9.0), {}, watch_with(tmp_path, CONTENDED / 2))


def test_a_miss_on_a_contended_machine_is_not_judged(tmp_path: Path, world1: None) -> None:
    with use_clock(lambda: 10.0), pytest.raises(NotJudged, match=r"other work took 90 % of the machine's CPU time"):
        settle(False, "target", (3.5, 9.0), {}, watch_with(tmp_path, 0.9))


def test_an_interval_across_a_bound_is_not_judged(tmp_path: Path, world1: None) -> None:
    with use_clock(lambda: 10.0), pytest.raises(NotJudged, match=r"straddles a bound"):
        settle(None, "target", (1.0, 4.0), {}, watch_with(tmp_path, 0.0))


def test_a_smoke_run_measures_once_at_length_one_and_judges_nothing(tmp_path: Path, world1: None) -> None:
    lengths: list[int] = []

    def measure(length: int) -> dict[str, float]:
        lengths.append(length)
        return {"low": 1.0, "high": 4.0}  # straddles the target's bound 2.0 at every length

    measure_until_decided(measure, (60, 240), ("low", "high"), (-2.0, 2.0), smoke=True)
    assert lengths == [1]
    with use_clock(lambda: 10.0):  # a miss on a quiet machine, judged nothing in a smoke run
        settle(False, "target", (3.5, 9.0), {}, watch_with(tmp_path, 0.0), smoke=True)
    # negative control: the ordinary run measures every length until decided and fails the same miss
    lengths.clear()
    measure_until_decided(measure, (60, 240), ("low", "high"), (-2.0, 2.0))
    assert lengths == [60, 240]
    with use_clock(lambda: 10.0), pytest.raises(pytest.fail.Exception, match="target missed"):
        settle(False, "target", (3.5, 9.0), {}, watch_with(tmp_path, 0.0))
