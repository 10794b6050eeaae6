"""Every thread's current frame, read without letting the garbage collector run meanwhile.

``sys._current_frames()`` builds its dict while it holds the interpreter's lock on the list of thread states.
An allocation there can start a collection, and a collection runs the ``gc.callbacks`` that libraries register
(Hypothesis registers one once it has run a test in the process). Python code in a callback may hand the GIL to
another thread; a thread that is starting or ending then waits for that same lock while holding the GIL, and
the process stops for good (seen on 1024 simulated ranks ending while the watchdog read their frames, in a
pytest worker that had run Hypothesis tests before). With collection off for the call, no callback runs there.
"""

from __future__ import annotations

import gc
import sys
from types import FrameType


def current_frames() -> dict[int, FrameType]:
    """``sys._current_frames()`` with automatic garbage collection off for the call (as it was after)."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        return sys._current_frames()
    finally:
        if enabled:
            gc.enable()
