"""The one clock every measurement reads; tests substitute a fake one with :func:`use_clock`.

Code that times something calls :func:`now` (never ``time.perf_counter`` directly), so a test can
replace the clock for the whole measurement library at once::

    ticks = iter([0.0, 0.5])
    with use_clock(lambda: next(ticks)):
        ...  # every now() in here returns 0.0, then 0.5
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

Clock = Callable[[], float]

_clock: Clock = time.perf_counter


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
