"""Running an existing training script inside a case, on every rank, as torchrun would start it.

``run_script("train.py", "--epochs", "1")`` in a case body runs the file on the calling rank (every rank runs
the body) with ``sys.argv == ["train.py", "--epochs", "1"]``, ``__name__ == "__main__"`` and the script's
folder first on ``sys.path``; ``module=True`` runs a module like ``torchrun -m`` (the working directory first on
``sys.path``), and a callable (a script's ``main``) is called with ``sys.argv`` set. The rank's torchrun
environment is already there, ``init_process_group`` adopts the world's group and ``destroy_process_group``
keeps it (:mod:`.adopt_group`). What the script prints through ``sys.stdout``/``sys.stderr`` is shown as
usual and kept in :attr:`ScriptRun.output` (output written straight to the file descriptors by C code is
not kept). ``sys.exit(n)`` ends the script, not the rank: the status is :attr:`ScriptRun.exit_code`, and a
status other than 0 fails the case on that rank (:class:`ScriptFailed`, naming the rank, the status and the
last lines printed) unless ``check=False``. An exception the script raises fails the case with its traceback.

On simulated ranks (threads taking turns) ``sys.argv``, ``sys.path`` and the output streams are each rank's
own (``simulated/process_state.py``) and ``RANK`` is read through the rank's own environment, so each rank's
run has its own argv, output, status and rank (``tests/world/simulated/test_torchrun_like.py``).

Runs on ranks only (no pytest import).
"""

from __future__ import annotations

import os
import runpy
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, TextIO

from pytest_dmlbench.errors import ScriptFailed

TAIL_LINES = 20


@dataclass(frozen=True)
class ScriptRun:
    """How a script ended on this rank: its exit status, what it printed, and what a callable returned."""

    script: str
    rank: int
    exit_code: int
    output: str
    value: Any = None


class _Tee:
    """A text stream that writes to the stream it replaces and keeps a copy."""

    def __init__(self, stream: TextIO, kept: list[str]) -> None:
        self._stream = stream
        self._kept = kept

    def write(self, text: str) -> int:
        self._kept.append(text)
        return self._stream.write(text)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


@contextmanager
def _as_started(argv: list[str], path_entry: str, kept: list[str]) -> Iterator[None]:
    """``sys.argv``, ``sys.path[0]`` and the output streams as the script's process would have them."""
    saved = sys.argv, list(sys.path), sys.stdout, sys.stderr
    sys.argv = argv
    sys.path.insert(0, path_entry)
    sys.stdout = _Tee(sys.stdout, kept)
    sys.stderr = _Tee(sys.stderr, kept)
    try:
        yield
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        sys.argv, sys.path[:], sys.stdout, sys.stderr = saved[0], saved[1], saved[2], saved[3]


def _exit_status(exc: SystemExit) -> int:
    """The process status ``sys.exit(code)`` would give: None is 0, an int itself, anything else 1 (printed)."""
    if exc.code is None:
        return 0
    if isinstance(exc.code, int):
        return exc.code
    print(exc.code, file=sys.stderr)
    return 1


def run_script(script: str | os.PathLike[str] | Callable[[], Any], *args: str, module: bool = False,
               check: bool = True) -> ScriptRun:
    """Run ``script`` (a file, a module name with ``module=True``, or a callable) with ``args`` on this rank."""
    rank = int(os.environ.get("RANK", "0"))
    argv_tail = [str(arg) for arg in args]
    kept: list[str] = []
    value: Any = None
    if callable(script):
        home = str(getattr(script, "__module__", "") or "")
        name = f"{home}.{getattr(script, '__qualname__', script)}" if home else repr(script)
        argv0 = str(getattr(sys.modules.get(home), "__file__", None) or name)
        path_entry = os.getcwd()
    elif module:
        name = argv0 = str(script)
        path_entry = os.getcwd()
    else:
        name = argv0 = os.fspath(script)
        if not os.path.isfile(name):
            raise FileNotFoundError(f"run_script: no script file {name!r} (working directory {os.getcwd()}); "
                                    "give a path to a .py file, or a module name with module=True")
        path_entry = os.path.dirname(os.path.abspath(name))
    code = 0
    with _as_started([argv0, *argv_tail], path_entry, kept):
        try:
            if callable(script):
                value = script()
            elif module:
                runpy.run_module(name, run_name="__main__", alter_sys=True)
            else:
                runpy.run_path(name, run_name="__main__")
        except SystemExit as exc:
            code = _exit_status(exc)
    run = ScriptRun(name, rank, code, "".join(kept), value)
    if check and code != 0:
        tail = "\n".join(run.output.splitlines()[-TAIL_LINES:]) or "(nothing)"
        raise ScriptFailed(f"{name} exited with status {code} on rank {rank}; its last output:\n{tail}\n"
                           "(pass check=False to run_script to read ScriptRun.exit_code yourself)")
    return run
