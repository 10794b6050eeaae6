"""Reading every thread's frame runs no ``gc.callbacks``: a collection started inside ``sys._current_frames()``
ran Hypothesis's callback there, whose Python code could hand the GIL to a thread that then waited for the lock
the call holds, and a pytest worker stopped for good with 1024 simulated ranks ending (see the module)."""

from __future__ import annotations

import gc
import sys
import threading
from collections.abc import Callable, Iterator
from types import FrameType
from typing import Any

import pytest

from pytest_dmlbench.world.thread_frames import current_frames


@pytest.fixture
def collected_in() -> Iterator[list[str]]:
    """A collection at almost every allocation; the list of the functions each ran its callbacks in (a
    collection inside ``sys._current_frames()`` runs them with its Python caller as the next frame)."""
    callers: list[str] = []

    def record(phase: str, info: dict[str, Any]) -> None:
        callers.append(sys._getframe(1).f_code.co_name)

    threshold = gc.get_threshold()
    gc.set_threshold(1, 1, 1)
    gc.callbacks.append(record)
    try:
        yield callers
    finally:
        gc.callbacks.remove(record)
        gc.set_threshold(*threshold)


def unguarded() -> dict[int, FrameType]:
    """The negative control: the plain read, from a function of its own name."""
    return sys._current_frames()


def _with_threads(read: Callable[[], dict[int, FrameType]], times: int = 20) -> dict[int, FrameType]:
    """``read()`` ``times`` times while 50 threads wait, so the dict it builds is large."""
    release = threading.Event()
    threads = [threading.Thread(target=release.wait) for _ in range(50)]
    for thread in threads:
        thread.start()
    try:
        return [read() for _ in range(times)][-1]
    finally:
        release.set()
        for thread in threads:
            thread.join()


def test_no_collection_runs_inside_the_read_and_every_thread_is_there(collected_in: list[str]) -> None:
    frames = _with_threads(current_frames)
    assert threading.get_ident() in frames and len(frames) >= 51
    assert "current_frames" not in collected_in, collected_in
    assert gc.isenabled()


def test_negative_control_the_plain_read_runs_the_callbacks_inside(collected_in: list[str]) -> None:
    _with_threads(unguarded)
    assert "unguarded" in collected_in, collected_in


def test_collection_left_off_stays_off() -> None:
    gc.disable()
    try:
        current_frames()
        assert not gc.isenabled()
    finally:
        gc.enable()
