"""Run a study's ``main`` in this process, as its command would, and keep what it printed."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import pytest


@dataclass(frozen=True)
class Ran:
    """A study's exit code (``main``'s return, or ``SystemExit``'s) and what it printed."""

    returncode: int
    stdout: str
    stderr: str


def run_study(main: Callable[[list[str]], Any], capsys: pytest.CaptureFixture[str], *args: str) -> Ran:
    """``python -m studies.<name> ARGS``, in process: argparse's refusals and ``SystemExit`` count as exit codes."""
    capsys.readouterr()
    try:
        returned = main(list(args))
        code = returned if isinstance(returned, int) else 0
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    printed = capsys.readouterr()
    return Ran(code, printed.out, printed.err)


def lines_of(ran: Ran) -> Sequence[str]:
    return ran.stdout.splitlines()
