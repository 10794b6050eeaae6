"""Other work's share of the machine from /proc/stat: arithmetic on a written file, and the real counters."""

from __future__ import annotations

import multiprocessing
import os
import time
from pathlib import Path

import pytest

from pytest_dmlbench.measure.clock import use_clock
from pytest_dmlbench.measure.contention import ContentionWatch, machine_busy_s

TICK = os.sysconf("SC_CLK_TCK")


def write_stat(path: Path, busy_s: float, idle_s: float = 1000.0) -> None:
    """A /proc/stat whose busy time (user + system + steal) is ``busy_s`` seconds."""
    user, system, steal = int(0.5 * busy_s * TICK), int(0.3 * busy_s * TICK), int(0.2 * busy_s * TICK)
    path.write_text(f"cpu  {user} 0 {system} {int(idle_s * TICK)} 7 0 0 {steal} 0 0\ncpu0 1 2 3 4 5 6 7 8 9 10\n")


def test_the_share_is_busy_time_less_the_measured_processes_over_all_cores(tmp_path: Path) -> None:
    stat = tmp_path / "stat"
    write_stat(stat, busy_s=100.0)
    ticks = iter([10.0, 12.0])
    with use_clock(lambda: next(ticks)):
        watch = ContentionWatch.start(stat)
        write_stat(stat, busy_s=103.0, idle_s=1001.0)  # 3 s busy over 2 s on 2 cores, 1 s of it measured
        assert watch.share(measured_cpu_s=1.0, cores=2) == pytest.approx(0.5)


def test_iowait_and_idle_are_not_busy(tmp_path: Path) -> None:
    stat = tmp_path / "stat"
    stat.write_text(f"cpu  {TICK} 0 0 {50 * TICK} {50 * TICK} 0 0 0 0 0\n")
    assert machine_busy_s(stat) == pytest.approx(1.0)


def test_without_proc_stat_there_is_no_share(tmp_path: Path) -> None:
    assert machine_busy_s(tmp_path / "absent") is None
    assert ContentionWatch.start(tmp_path / "absent").share() is None


def _spin(seconds: float) -> None:
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass


def test_busy_processes_beside_the_measured_one_show_as_other_work() -> None:
    cores = os.cpu_count() or 1
    watch = ContentionWatch.start()
    hogs = [multiprocessing.Process(target=_spin, args=(1.0,)) for _ in range(cores)]
    for hog in hogs:
        hog.start()
    for hog in hogs:
        hog.join()
    share = watch.share()
    assert share is not None and share > 0.5, share

