"""CPU contention from Linux's pressure-stall counter: arithmetic on a written file, and the real counter."""

from __future__ import annotations

import multiprocessing
import os
import time
from pathlib import Path

import pytest

from pytest_dmlbench.measure.clock import use_clock
from pytest_dmlbench.measure.contention import PSI_CPU, ContentionWatch, cpu_stall_us


def write_psi(path: Path, some_total_us: int) -> None:
    path.write_text(f"some avg10=1.00 avg60=2.00 avg300=3.00 total={some_total_us}\n"
                    "full avg10=0.00 avg60=0.00 avg300=0.00 total=0\n")


def test_the_share_is_the_stall_growth_over_the_elapsed_time(tmp_path: Path) -> None:
    psi = tmp_path / "cpu"
    write_psi(psi, 7_000_000)
    ticks = iter([10.0, 12.0])
    with use_clock(lambda: next(ticks)):
        watch = ContentionWatch.start(psi)
        write_psi(psi, 8_500_000)  # 1.5 s of stall in 2 s
        assert watch.share() == pytest.approx(0.75)


def test_without_pressure_information_there_is_no_share(tmp_path: Path) -> None:
    assert cpu_stall_us(tmp_path / "absent") is None
    assert ContentionWatch.start(tmp_path / "absent").share() is None


def _spin(seconds: float) -> None:
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass


@pytest.mark.skipif(cpu_stall_us() is None, reason=f"{PSI_CPU} is not available on this kernel")
def test_more_busy_processes_than_cores_show_as_contention() -> None:
    cores = len(os.sched_getaffinity(0))
    watch = ContentionWatch.start()
    hogs = [multiprocessing.Process(target=_spin, args=(1.0,)) for _ in range(2 * cores)]
    for hog in hogs:
        hog.start()
    for hog in hogs:
        hog.join()
    share = watch.share()
    assert share is not None and share > 0.5, share
