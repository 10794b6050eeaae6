"""The fork server of :mod:`tests.forkserver`: imports torch and pytest once and says it is ready, then for every
request (one JSON line on stdin) forks a child that runs ``python -m pytest`` there; it answers the child's pid, then
its exit status (one JSON line each on stdout). Started by path, with nothing of ``tests`` imported."""

from __future__ import annotations

import atexit
import gc
import json
import os
import sys
import tempfile
import threading
from typing import Any


def run_child(request: dict[str, Any]) -> int:
    """In the forked child: become ``python -m pytest ARGS`` in the request's folder and environment."""
    import pytest

    try:  # what `python -m pytest` calls (pytest.console_main warns that it is not for programmatic use)
        from _pytest.config import _console_main as console_main
    except ImportError:  # pytest before 9.1
        console_main = pytest.console_main

    os.setpgid(0, 0)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    for fd, path in ((1, request["out"]), (2, request["err"])):
        target = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        os.dup2(target, fd)
        os.close(target)
    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update(request["env"])
    tempfile.tempdir = None  # TMPDIR is read again
    sys.path[0] = request["cwd"]  # as `python -m pytest` in that folder has it (PYTHONPATH is the server's)
    sys.argv = [pytest.__file__, *request["args"]]
    try:
        code = console_main()
    except SystemExit as stop:
        code = stop.code if isinstance(stop.code, int) else (0 if stop.code is None else 1)
    sys.stdout.flush()
    sys.stderr.flush()
    threading._shutdown()  # type: ignore[attr-defined]  # as an interpreter's exit waits for its threads
    atexit._run_exitfuncs()
    sys.stdout.flush()
    sys.stderr.flush()
    return int(code)


def serve() -> None:
    # The imports every child would repeat. Not the plugin: pytest may mark it for assertion rewriting, which it
    # cannot do to a module imported already (PytestAssertRewriteWarning in every child's output).
    # With torch: what the plugin's zygote imports for its ranks' flop counter (pytest_dmlbench.measure.flops.preload),
    # about 800 modules, seconds of a core in every inner run's zygote otherwise.
    import pytest  # noqa: F401
    import torch._dynamo
    import torch.utils.flop_counter  # noqa: F401

    # Every child inherits these imports and never frees them: frozen, its garbage collections skip them. A child's
    # full collections (pytest runs two as its session ends) then take milliseconds instead of a third of a second
    # over torch's objects: a one-case inner run, forked, took 1.64 s instead of 2.03 s (medians of four, side by
    # side, 2026-11-30).
    gc.freeze()

    answer = sys.stdout
    answer.write(json.dumps({"ready": 1}) + "\n")  # the client's first run waits for this, not its own timeout
    answer.flush()
    for line in sys.stdin:
        request = json.loads(line)
        answer.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:
            code = 1
            try:
                code = run_child(request)
            finally:
                os._exit(code)
        answer.write(json.dumps({"pid": pid}) + "\n")
        answer.flush()
        _, status = os.waitpid(pid, 0)
        answer.write(json.dumps({"returncode": os.waitstatus_to_exitcode(status)}) + "\n")
        answer.flush()


if __name__ == "__main__":
    serve()
