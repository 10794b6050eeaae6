"""The one clock every measurement reads; tests substitute a fake one with :func:`use_clock`.

Code that times something calls :func:`now` (never ``time.perf_counter`` directly), so a test can
replace the clock for the whole measurement library at once::

    ticks = iter([0.0, 0.5])
    with use_clock(lambda: next(ticks)):
        ...  # every now() in here returns 0.0, then 0.5

Beside the wall clock it keeps the CPU clock of :func:`cpu_now`: the CPU seconds the calling thread has
used (``time.thread_time``), the quiet figure a rank's step is also judged by, and
:func:`cpu_clock_missing`, why a platform cannot read it.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

Clock = Callable[[], float]

_clock: Clock = time.perf_counter
_cpu_clock: Clock = time.thread_time
_process_cpu_clock: Clock = time.process_time


def now() -> float:
    """Seconds on the current clock (``time.perf_counter`` unless substituted); only differences count."""
    return _clock()


def current_clock() -> Clock:
    """The clock function :func:`now` calls at the moment."""
    return _clock


@contextmanager
def use_clock(clock: Clock) -> Iterator[Clock]:
    """Make :func:`now` call ``clock`` inside the ``with`` block; the previous clock comes back afterwards."""
    if not callable(clock):
        raise TypeError(f"use_clock needs a callable returning seconds as float, got {clock!r}")
    global _clock
    previous = _clock
    _clock = clock
    try:
        yield clock
    finally:
        _clock = previous


class ManualClock:
    """A clock that only moves when told: ``advance(seconds)``. Handy as a fake in tests."""

    def __init__(self, start: float = 0.0) -> None:
        self.time = float(start)

    def __call__(self) -> float:
        return self.time

    def advance(self, seconds: float) -> None:
        if seconds < 0:
            raise ValueError(f"a clock cannot go backwards: advance({seconds!r})")
        self.time += float(seconds)


def cpu_now(whole_process: bool = False) -> float:
    """CPU seconds the calling thread has used (``time.thread_time`` unless substituted), or with
    ``whole_process`` every thread of the process (``time.process_time``: a rank whose intra-op pool computes
    beside its main thread); only differences count. Waiting (a peer, a lock, a sleep, I/O) does not advance
    it."""
    return _process_cpu_clock() if whole_process else _cpu_clock()


def cpu_clock_missing() -> str | None:
    """Why this platform cannot read a thread's CPU time, or None when it can (read once, as a probe)."""
    try:
        _cpu_clock()
    except (OSError, AttributeError, NotImplementedError) as exc:
        return f"this platform cannot read a thread's CPU time ({type(exc).__name__}: {exc})"
    return None


@contextmanager
def use_cpu_clock(clock: Clock) -> Iterator[Clock]:
    """Make :func:`cpu_now` (both scopes) call ``clock`` inside the ``with`` block (tests)."""
    if not callable(clock):
        raise TypeError(f"use_cpu_clock needs a callable returning seconds as float, got {clock!r}")
    global _cpu_clock, _process_cpu_clock
    previous = _cpu_clock, _process_cpu_clock
    _cpu_clock = _process_cpu_clock = clock
    try:
        yield clock
    finally:
        _cpu_clock, _process_cpu_clock = previous
