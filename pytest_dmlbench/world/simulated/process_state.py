"""Each simulated rank's own ``sys.argv``, ``sys.path``, ``sys.stdout``/``sys.stderr``, ``__main__`` module,
working directory and default dtype.

These are the process's, but simulated ranks run one at a time and switch only at the turn (``turns``): at
every switch the leaving rank's values are saved and the entering rank's put in place, so a script run on a
rank (``world/scripts.py``) reads its own argv and prints into its own kept output even while the ranks
interleave at collectives. A rank starts from the values the process had when the world began; the process
gets them back when the world ends.

``__main__`` is among them because a script run as ``__main__`` (``runpy``) puts its own module there and puts back,
when it ends, whatever was there when it started: with ranks interleaving, that is another rank's script, which
then stayed the process's ``__main__`` after the world (and a later ``multiprocessing`` spawn re-ran it).
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from types import ModuleType
from typing import Any, TextIO

import torch


@dataclass
class _Values:
    argv: list[str]
    path: list[str]
    stdout: TextIO
    stderr: TextIO
    main: ModuleType | None
    cwd: str
    dtype: torch.dtype

    @classmethod
    def current(cls) -> _Values:
        return cls(sys.argv, sys.path, sys.stdout, sys.stderr, sys.modules.get("__main__"), os.getcwd(),
                   torch.get_default_dtype())

    def fresh_copy(self) -> _Values:
        """The values a rank starts from: its own lists, the same streams, ``__main__``, folder and dtype."""
        return _Values(list(self.argv), list(self.path), self.stdout, self.stderr, self.main, self.cwd, self.dtype)

    def apply(self, current: _Values | None = None) -> None:
        sys.argv, sys.path, sys.stdout, sys.stderr = self.argv, self.path, self.stdout, self.stderr
        if self.main is not None:
            sys.modules["__main__"] = self.main
        else:
            sys.modules.pop("__main__", None)
        if current is None or current.cwd != self.cwd:
            os.chdir(self.cwd)
        if current is None or current.dtype != self.dtype:
            torch.set_default_dtype(self.dtype)


class RankProcessState:
    """The per-rank process values of one world, swapped at every switch of the turn."""

    def __init__(self, world_size: int) -> None:
        self._saved: list[_Values | None] = [None] * world_size
        self._original: _Values | None = None
        self._original_path: list[str] = []

    def begin(self) -> None:
        """Remember the process's values; the first rank to run starts from a copy of them."""
        self._original = _Values.current()
        self._original_path = list(sys.path)
        self._original.fresh_copy().apply(self._original)

    def switch(self, leaving: int, entering: int) -> None:
        """Save ``leaving``'s values and put ``entering``'s in place (a rank not seen yet starts fresh)."""
        assert self._original is not None, "begin() first"
        current = _Values.current()
        self._saved[leaving] = current
        saved = self._saved[entering]
        (saved if saved is not None else self._original.fresh_copy()).apply(current)

    def end(self) -> None:
        """Give the process its own values back (whatever the ranks left)."""
        if self._original is None:
            return
        original: Any = self._original
        original.apply()
        sys.path[:] = self._original_path
        self._saved = [None] * len(self._saved)
