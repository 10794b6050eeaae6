"""A traceback's text, formatted once for every rank that raised the same exception at the same place.

When a simulated rank fails, the world releases every other rank from the collective it waits in with the same
:class:`~pytest_dmlbench.world.simulated.turns.WorldAborted`, raised at the same line: at 1024 ranks, 1023 copies
of one traceback. Formatting one reads each frame's source line and, on Python 3.11 and later, parses it to place
its carets; done once per distinct traceback, a case whose rank failed among 1024 formats it once, not 1023 times.
"""

from __future__ import annotations

import threading
import traceback
from collections.abc import Hashable
from types import CodeType, TracebackType


def traceback_key(exc: BaseException, tb: TracebackType | None) -> Hashable | None:
    """What the text of ``exc`` formatted from ``tb`` depends on: its type, message and notes, and each frame's
    code and instruction. None where a chained exception (cause or context) would be formatted too."""
    if exc.__cause__ is not None or exc.__context__ is not None:
        return None
    frames: list[tuple[CodeType, int]] = []
    while tb is not None:
        frames.append((tb.tb_frame.f_code, tb.tb_lasti))
        tb = tb.tb_next
    return type(exc), str(exc), tuple(getattr(exc, "__notes__", ())), tuple(frames)


class SharedTracebacks:
    """The traceback texts of one case's ranks, each distinct one formatted once (safe from every rank thread)."""

    def __init__(self) -> None:
        self._texts: dict[Hashable, str] = {}
        self._lock = threading.Lock()

    def __len__(self) -> int:
        """How many distinct tracebacks were formatted."""
        return len(self._texts)

    def text(self, exc: BaseException, tb: TracebackType | None) -> str:
        """``traceback.format_exception`` of ``exc`` from ``tb`` on, as one string."""
        key = traceback_key(exc, tb)
        if key is None:
            return "".join(traceback.format_exception(type(exc), exc, tb))
        with self._lock:
            text = self._texts.get(key)
        if text is None:
            text = "".join(traceback.format_exception(type(exc), exc, tb))
            with self._lock:
                self._texts.setdefault(key, text)
        return text
