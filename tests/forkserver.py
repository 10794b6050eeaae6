"""Inner pytest runs forked from a process that has imported torch and pytest already.

An inner ``python -m pytest`` spends most of its CPU before it collects anything: importing torch (2.5-3 s of a
core on the project's 2-core runners) and pytest. The plugin's own tests start hundreds of them.
:class:`ForkServer` keeps one process per test process that has done those imports once and forks a
child per inner run; the child takes the run's folder, environment, arguments and output files, and runs
pytest's console entry point as ``python -m pytest`` would, exiting as a process does (threads joined, exit
handlers run).

The interpreters a forked run starts itself (the paired gate's block servers, pytest-xdist's workers, torchrun's
agent and workers, Ray's workers) are forked from the same server where they can be: the run sees a launcher as
``sys.executable`` (:mod:`tests.forkserver_shim`; which commands, :mod:`tests.forkserver_main`). Tests that start
torchrun or ``python -m pytest`` themselves take it from :func:`python`; scripts find it first on
:func:`path_with_python`.

A run whose environment changes what an interpreter reads only at start-up (``PYTHON*`` but ``PYTHONPATH``,
``LD_*``, allocator, thread-pool and torch variables) cannot be served by a fork of a process that has started
already: :func:`forkable` says so, and such runs start a fresh interpreter. A child honours its own
``PYTHONPATH`` by its ``sys.path``, and applies the thread count torchrun gives its workers (or a Ray worker takes
for its task) itself. `DMLBENCH_TEST_FORKSERVER=0` turns the server off;
`DMLBENCH_TEST_FORKSERVER_LOG=FILE` appends each run sent to a fresh interpreter, and why, to FILE.

The server's own code is :mod:`tests.forkserver_main`, started by path so that nothing of ``tests`` is
imported into the processes it forks.
"""

from __future__ import annotations

import json
import os
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from tests.forkserver_main import LAUNCHER, log_refusal, unforkable_variables

SERVER_MAIN = Path(__file__).with_name("forkserver_main.py")
ENABLED_ENV = "DMLBENCH_TEST_FORKSERVER"
STARTUP_TIMEOUT_S = 300.0  # the server's imports (torch and its compiler stack) on a loaded machine


def enabled() -> bool:
    """Whether inner runs are forked: yes unless ``DMLBENCH_TEST_FORKSERVER=0``, which starts an interpreter for
    every run (as before the fork server; for telling a difference of the fork apart)."""
    return os.environ.get(ENABLED_ENV, "1") != "0"


class ForkServerGone(RuntimeError):
    """The fork server exited or stopped answering."""


class ForkServer:
    """One server process; :meth:`run` forks a child of it per inner pytest run."""

    def __init__(self, env: dict[str, str]) -> None:
        self.env = dict(env)
        self.lock = threading.Lock()  # one run at a time: requests and replies share one pipe
        self.started = False  # the server said it has done its imports
        self.folder = tempfile.mkdtemp(prefix="fs-")  # its socket and launcher: short, and outliving any run
        self.process = subprocess.Popen(
            [sys.executable, str(SERVER_MAIN), self.folder], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            env=self.env, cwd=tempfile.gettempdir(), text=True, bufsize=1)

    def alive(self) -> bool:
        return self.process.poll() is None

    def _reply(self, deadline: float) -> dict[str, int]:
        assert self.process.stdout is not None
        while True:
            left = deadline - time.monotonic()
            ready, _, _ = select.select([self.process.stdout], [], [], max(left, 0))
            if not ready:
                raise TimeoutError
            line = self.process.stdout.readline()
            if not line:
                raise ForkServerGone(f"the fork server exited with {self.process.wait()}")
            reply: dict[str, int] = json.loads(line)
            return reply

    def wait_ready(self) -> None:
        """Wait until the server has done its imports (a run's timeout counts the run, not them)."""
        if not self.started:
            assert self._reply(time.monotonic() + STARTUP_TIMEOUT_S) == {"ready": 1}
            self.started = True

    def launcher(self) -> str:
        """The interpreter to start where a run would be forked from this server (:mod:`tests.forkserver_shim`)."""
        with self.lock:
            self.wait_ready()
        return str(Path(self.folder, LAUNCHER))

    def launcher_folder(self) -> str:
        """The folder of ``python`` and ``pytest`` commands that start as :meth:`launcher` does."""
        return str(Path(self.launcher()).with_name("bin"))

    def run(self, args: list[str], cwd: Path, env: dict[str, str],
            timeout: float) -> subprocess.CompletedProcess[str]:
        """``python -m pytest ARGS`` in ``cwd`` with ``env``, forked; raises ``subprocess.TimeoutExpired`` (the run
        killed) as ``subprocess.run`` does."""
        assert self.process.stdin is not None
        with self.lock, tempfile.TemporaryDirectory(prefix="fs-") as scratch:
            self.wait_ready()
            out, err = Path(scratch, "out"), Path(scratch, "err")
            request = {"args": args, "cwd": str(cwd), "env": env, "out": str(out), "err": str(err)}
            self.process.stdin.write(json.dumps(request) + "\n")
            self.process.stdin.flush()
            deadline = time.monotonic() + timeout
            pid = self._reply(deadline)["pid"]
            try:
                returncode = self._reply(deadline)["returncode"]
            except TimeoutError:
                os.kill(pid, signal.SIGKILL)
                self._reply(time.monotonic() + 60)  # the server reaps it
                raise subprocess.TimeoutExpired(["pytest", *args], timeout, out.read_text(errors="replace"),
                                                err.read_text(errors="replace")) from None
            return subprocess.CompletedProcess(["pytest", *args], returncode, out.read_text(errors="replace"),
                                               err.read_text(errors="replace"))

    def close(self) -> None:
        if self.alive():
            assert self.process.stdin is not None
            self.process.stdin.close()
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        shutil.rmtree(self.folder, ignore_errors=True)


_SERVERS: list[ForkServer] = []


def server_for(env: dict[str, str]) -> ForkServer | None:
    """This process's fork server if forking is enabled and ``env`` allows it (started on first use, restarted
    if it died), else None."""
    if not enabled():
        return None
    if _SERVERS and not _SERVERS[0].alive():
        _SERVERS.pop().close()
    if not _SERVERS:
        _SERVERS.append(ForkServer(env))
    blocking = unforkable_variables(env, _SERVERS[0].env)
    if blocking:
        log_refusal(["(a test's run)"], f"start-up variables differ: {', '.join(blocking)}")
        return None
    return _SERVERS[0]


def python(env: dict[str, str]) -> str:
    """The interpreter for a test to start ``python -m pytest``, torchrun or pytest-xdist with in ``env``: the fork
    server's launcher, which forks what it can (:mod:`tests.forkserver_main`), else ``sys.executable``."""
    server = server_for(env)
    return sys.executable if server is None else server.launcher()


def path_with_python(env: dict[str, str]) -> str:
    """``PATH`` for a script that starts ``python`` or ``pytest`` in ``env``: the fork server's (which fork what
    they can), then this interpreter's, then ``env``'s."""
    server = server_for(env)
    folders = [] if server is None else [server.launcher_folder()]
    return os.pathsep.join([*folders, str(Path(sys.executable).parent), env.get("PATH", os.defpath)])


def close_servers() -> None:
    while _SERVERS:
        _SERVERS.pop().close()
