from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from pytest_dmlbench.measure import memory
from pytest_dmlbench.measure.memory import (
    PeakMemory,
    PeakMemoryWatch,
    case_peak_rss_bytes,
    current_rss_bytes,
    note_rank_start,
    parse_status,
    peak_memory_metrics,
    peak_rss_bytes,
    release_freed_memory,
    reset_peak_rss,
)

STATUS = """Name:\tpython3
Umask:\t0022
State:\tR (running)
VmPeak:\t  812344 kB
VmSize:\t  812340 kB
VmHWM:\t  321520 kB
VmRSS:\t  300100 kB
Threads:\t5
Cpus_allowed_list:\t0-1
"""


def test_parse_status_reads_memory_fields_in_bytes() -> None:
    fields = parse_status(STATUS)
    assert fields["VmHWM"] == 321520 * 1024
    assert fields["VmRSS"] == 300100 * 1024
    assert "Threads" not in fields and "Name" not in fields and "State" not in fields


def test_parse_status_skips_malformed_lines() -> None:
    assert parse_status("VmHWM:\tlots kB\nVmRSS:\t12 kB\ngarbage\n") == {"VmRSS": 12 * 1024}


def test_peak_and_current_rss_come_from_the_status_file(tmp_path: Path) -> None:
    status = tmp_path / "status"
    status.write_text(STATUS)
    assert peak_rss_bytes(status) == 321520 * 1024
    assert current_rss_bytes(status) == 300100 * 1024


def test_reset_reports_failure_when_clear_refs_is_not_writable(tmp_path: Path) -> None:
    assert reset_peak_rss(tmp_path / "no-such-dir" / "clear_refs") is False


def test_stop_before_start_says_what_to_do() -> None:
    with pytest.raises(RuntimeError, match="before start"):
        PeakMemoryWatch().stop()


@pytest.mark.skipif(not reset_peak_rss(), reason="/proc/self/clear_refs not writable on this machine")
def test_reset_peak_forgets_an_earlier_allocation() -> None:
    import torch

    block = torch.ones(150_000_000, dtype=torch.uint8)
    del block
    stale = peak_rss_bytes()
    watch = PeakMemoryWatch().start()
    peak = watch.stop()
    assert stale is not None and peak.peak_rss_mb is not None and peak.rss_reset
    # negative control: before the reset the high-water mark holds the 150 MB block, after it does not
    assert stale / 1e6 - peak.peak_rss_mb > 100
    assert peak.peak_cuda_mb is None


@pytest.mark.skipif(not reset_peak_rss(), reason="/proc/self/clear_refs not writable on this machine")
def test_a_case_peak_does_not_carry_what_earlier_cases_keep(monkeypatch: pytest.MonkeyPatch) -> None:
    """A rank that kept 150 MB from earlier cases (imports, caches) reads the same case peak as a rank that
    did not: the peak is what the case raised over its own start, on top of the rank's start-up size."""
    import torch

    monkeypatch.setattr(memory, "_rank_start_rss", None)
    monkeypatch.setattr(memory, "_active_watch", None)
    start = note_rank_start()
    kept = torch.ones(150_000_000, dtype=torch.uint8)  # what earlier cases left in the rank
    watch = PeakMemoryWatch().start()
    during = torch.ones(50_000_000, dtype=torch.uint8)  # the case's own peak
    del during
    raw = peak_rss_bytes()
    peak = watch.stop()
    assert start is not None and raw is not None and peak.peak_rss_mb is not None
    assert abs(peak.peak_rss_mb - (start / 1e6 + 50)) < 20, (peak.peak_rss_mb, start / 1e6)
    # negative control: the raw high-water mark holds the kept 150 MB as well
    assert raw / 1e6 - peak.peak_rss_mb > 130, (raw / 1e6, peak.peak_rss_mb)
    assert case_peak_rss_bytes() == watch.peak_rss_bytes()
    del kept


def test_freed_heap_is_released_before_a_peak_is_reset() -> None:
    """Many small freed objects stay resident (glibc keeps the pages) until trimmed: a rank that ran a
    heavy case would otherwise start every later case's peak from that size."""
    held = [bytearray(1000) for _ in range(200_000)]  # about 200 MB in small heap chunks
    del held
    kept = current_rss_bytes()
    if not release_freed_memory():
        pytest.skip("no malloc_trim in this C library (not glibc): freed heap pages cannot be released")
    released = current_rss_bytes()
    assert kept is not None and released is not None
    assert kept - released > 100e6, (kept, released)  # negative control: before the trim they were resident


def test_case_peak_is_the_max_over_ranks() -> None:
    ranks = [PeakMemory(300.0, True, None), PeakMemory(420.5, True, None), PeakMemory(None, False, None)]
    metrics = peak_memory_metrics(ranks)
    assert metrics["peak_rss_mb"].samples == [420.5]
    assert metrics["peak_rss_mb"].unit == "MB"
    assert "peak_cuda_mb" not in metrics


def test_cuda_peak_is_reported_when_ranks_read_one() -> None:
    # no GPU on this machine: the per-rank records stand in for what CUDA ranks would report
    metrics = peak_memory_metrics([PeakMemory(1.0, True, 512.0), PeakMemory(1.0, True, 768.0)])
    assert metrics["peak_cuda_mb"].samples == [768.0]


def _child_collections(conn: Any) -> None:
    """In a forked child: which generations its first automatic collections reach."""
    import gc

    seen: list[int] = []
    gc.callbacks.append(lambda phase, info: seen.append(info["generation"]) if phase == "start" else None)
    garbage: list[list[object]] = [[] for _ in range(20_000)]  # enough allocations for several automatic collections
    del garbage
    conn.send(seen)
    conn.close()


def _forked_child_collects(after: Callable[[], object]) -> list[int]:
    """Run ``after`` in this process as a case's end would, then fork a child that allocates (a DataLoader
    worker, say) and return the generations the child's automatic collections reached."""
    import gc
    import multiprocessing

    gc.collect()
    gc.disable()  # no automatic collection while they are made: they stay young, as a case leaves them
    try:
        kept: list[list[object]] = [[] for _ in range(len(gc.get_objects()) // 2)]
    finally:
        gc.enable()
    for _ in range(12):  # a few cases' worth of starts and ends
        after()
    context = multiprocessing.get_context("fork")
    parent, child = context.Pipe()
    process = context.Process(target=_child_collections, args=(child,))
    process.start()
    seen = parent.recv()
    process.join()
    del kept
    return list(seen)


def test_a_forked_worker_does_not_inherit_a_due_full_collection() -> None:
    """A full collection in a forked child writes to every object it inherited (copy-on-write faults on
    all of them); the rank's own collection between cases must not leave one due."""
    import gc

    assert 2 not in _forked_child_collects(release_freed_memory)
    # negative control: collecting generation 1 between cases, as the rank did, leaves one due
    assert 2 in _forked_child_collects(lambda: gc.collect(1))
