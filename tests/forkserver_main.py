"""The fork server of :mod:`tests.forkserver`: imports torch and pytest once and says it is ready, then forks a child
per interpreter it is asked for, which becomes that run (its folder, environment, ``PYTHONPATH``, arguments and
files). Started by path, with nothing of ``tests`` imported.

Two kinds of requests arrive:

- an inner run, one JSON line on stdin from :class:`tests.forkserver.ForkServer`: the server answers the child's
  pid, then its exit status (one JSON line each on stdout);
- an interpreter that a forked run (or a test, through :func:`tests.forkserver.python`) starts itself, through a
  launcher it sees as ``sys.executable`` that runs :mod:`tests.forkserver_shim`: ``python -m pytest`` (the paired
  gate's two block servers, torchrun's workers), torchrun's agent, pytest-xdist's workers (:data:`FORKED_MODULES`,
  :data:`FORKED_CODE`), Ray's workers (:func:`ray_worker`: the variables of their runtime environment set, as Ray's
  setup script would before it runs the worker). The shim sends its arguments, folder, environment and open file
  descriptors over the server's Unix socket; the child takes the descriptors at the same numbers, and the shim stands
  for the child (its exit status, its death: the child is killed when the shim is). Anything else the launcher starts
  runs the real interpreter.

A request whose environment differs from the server's in what only an interpreter's start reads
(:data:`STARTUP_PREFIXES`) is not forked, but for ``PYTHONPATH``, which a child honours by its ``sys.path``, what
is read when used (:data:`READ_WHEN_USED`), and what torchrun sets for its workers, which a child applies itself
(:data:`APPLIED_IN_CHILD`). torch in a child takes the thread count ``OMP_NUM_THREADS`` holds when the run first
imports torch, as a fresh interpreter's torch would (:func:`take_thread_count_at_torch_import`; a Ray worker sets it
for its task's CPUs after it has started).
"""

from __future__ import annotations

import atexit
import builtins
import contextlib
import fcntl
import gc
import importlib
import io
import json
import os
import runpy
import select
import selectors
import shlex
import socket
import sys
import tempfile
import threading
import traceback
import types
from dataclasses import dataclass, replace
from typing import Any, Literal

# What an interpreter reads only while it starts (or torch reads while it is imported): a run whose environment
# differs from the server's in one of these gets a fresh interpreter. PYTHONPATH aside: a child puts its entries
# on sys.path where an interpreter would.
STARTUP_PREFIXES = ("PYTHON", "LD_", "OMP_", "MKL_", "KMP_", "GOMP_", "TORCH_", "CUDA_", "NCCL_", "MALLOC_")
PYTHONPATH = "PYTHONPATH"
SHIM = os.path.join(os.path.dirname(os.path.abspath(__file__)), "forkserver_shim.py")
LAUNCHER = "python"  # the launcher's name in the server's folder
MAX_FDS = 64  # descriptors a shim may hand over (its standard three, the paired channel's two, its lifeline)


# Start-up variables a forked child applies itself, where a run sets them (torchrun sets all three for its workers):
# the intra-op thread count (torch.set_num_threads when the run first imports torch, which leaves torch as its import
# under that variable would: the same `torch.__config__.parallel_info()`), NCCL's error handling (read when an NCCL
# group is made, from the child's environment), and unbuffered output (as `-u`).
APPLIED_IN_CHILD = ("OMP_NUM_THREADS", "TORCH_NCCL_ASYNC_ERROR_HANDLING", "PYTHONUNBUFFERED")
THREADS = "OMP_NUM_THREADS"


# Named like start-up variables but read when used, from the environment a child has taken: `breakpoint()` reads
# PYTHONBREAKPOINT at every call. Ray's driver sets it in the process that calls `ray.init()`, and so in every inner
# run a test process starts after its first in-process Ray test: counted as a start-up variable, it sent each of
# those runs to a fresh interpreter (about 4 s of CPU each for torch's import on a 2-core runner).
READ_WHEN_USED = ("PYTHONBREAKPOINT",)


def startup_environment(env: dict[str, str]) -> dict[str, str]:
    """The part of ``env`` that an interpreter reads only while it starts, ``PYTHONPATH`` and
    :data:`READ_WHEN_USED` left out."""
    return {k: v for k, v in env.items()
            if k.startswith(STARTUP_PREFIXES) and k != PYTHONPATH and k not in READ_WHEN_USED}


def forkable(env: dict[str, str], server_env: dict[str, str]) -> bool:
    """Whether a run in ``env`` can be forked from a server started in ``server_env``: their start-up variables
    agree, but for those a child applies itself (:data:`APPLIED_IN_CHILD`) where ``env`` sets them to a value it
    can apply."""
    return not unforkable_variables(env, server_env)


def unforkable_variables(env: dict[str, str], server_env: dict[str, str]) -> list[str]:
    """The start-up variables that keep a run in ``env`` from a fork of a server started in ``server_env``
    (sorted; empty where it can be forked)."""
    ours, theirs = startup_environment(server_env), startup_environment(env)
    differing = {name for name in ours.keys() | theirs.keys() if ours.get(name) != theirs.get(name)}
    blocking = {name for name in differing if name not in APPLIED_IN_CHILD or name not in theirs}
    if THREADS in differing and THREADS in theirs and thread_count(theirs[THREADS]) is None:
        blocking.add(THREADS)
    return sorted(blocking)


REFUSALS_LOG = "DMLBENCH_TEST_FORKSERVER_LOG"


def log_refusal(args: list[str], why: str) -> None:
    """Append a run sent to a fresh interpreter, and why, to the file ``DMLBENCH_TEST_FORKSERVER_LOG`` names
    (one JSON line each; nothing where it is unset): where the test command's inner runs lose their fork."""
    path = os.environ.get(REFUSALS_LOG)
    if path:
        with open(path, "a", encoding="utf-8") as log:
            log.write(json.dumps({"pid": os.getpid(), "args": args[:6], "why": why}) + "\n")


def thread_count(value: str | None) -> int | None:
    """The thread count a value of ``OMP_NUM_THREADS`` gives torch, where it is one a child can apply."""
    return int(value) if value is not None and value.isdigit() and int(value) > 0 else None


def path_entries(env: dict[str, str]) -> list[str]:
    return [entry for entry in env.get(PYTHONPATH, "").split(os.pathsep) if entry]


# What a forked run starts often enough to fork too: pytest (the paired gate's block servers, torchrun's workers),
# torchrun's agent, pytest-xdist's workers (execnet's bootstrap line), and Ray's workers (its raylet starts
# `python setup_worker.py default_worker.py ARGS`, or `python default_worker.py ARGS`). Anything else (Ray's other
# processes among them) runs the real interpreter.
FORKED_MODULES = ("pytest", "torch.distributed.run")
FORKED_CODE = ("import sys;exec(eval(sys.stdin.readline()))",)
RAY_WORKERS = os.path.join("ray", "_private", "workers")
RAY_SETUP, RAY_WORKER = "setup_worker.py", "default_worker.py"
RAY_SETUP_OPTIONS = ("--serialized-runtime-env-context", "--language")


@dataclass(frozen=True)
class Command:
    """What ``python [-u] [-B] (-m MODULE | -c CODE | SCRIPT) ARGS...`` asks for, where a forked child can run it,
    with the variables it sets before it runs (a Ray worker's runtime environment)."""

    kind: Literal["module", "code", "script"]
    target: str  # the module's name, the code, or the script's path
    args: list[str]
    unbuffered: bool = False
    no_bytecode: bool = False
    env_vars: tuple[tuple[str, str], ...] = ()


def parse_command(argv: list[str], python: str = sys.executable) -> Command | None:
    """The command an interpreter's arguments give, or None where it is not one to fork (any option but ``-u`` and
    ``-B``, a module or code not in :data:`FORKED_MODULES` or :data:`FORKED_CODE`, a script but Ray's worker);
    ``python`` is the interpreter a Ray worker's runtime environment may name."""
    options = set()
    while argv and argv[0] in ("-u", "-B"):
        options.add(argv[0])
        argv = argv[1:]
    if argv and not argv[0].startswith("-"):
        worker = ray_worker(argv, python)
        return None if worker is None else replace(worker, unbuffered="-u" in options, no_bytecode="-B" in options)
    if len(argv) < 2 or (argv[0], argv[1]) not in [*(("-m", m) for m in FORKED_MODULES),
                                                    *(("-c", c) for c in FORKED_CODE)]:
        return None
    return Command("module" if argv[0] == "-m" else "code", argv[1], argv[2:], unbuffered="-u" in options,
                   no_bytecode="-B" in options)


def ray_worker(argv: list[str], python: str) -> Command | None:
    """Ray's worker script and its arguments from ``setup_worker.py [its options] default_worker.py ARGS`` (what the
    setup script then runs, with its runtime environment's variables set) or ``default_worker.py ARGS``; None for
    any other script, or a runtime environment that needs more than variables (a command prefix, another
    interpreter or entry point, Java, or a variable that expands others)."""
    if is_ray_script(argv[0], RAY_WORKER):
        return Command("script", argv[0], argv[1:])
    if not is_ray_script(argv[0], RAY_SETUP):
        return None
    given: dict[str, str] = {}
    rest: list[str] = []
    args = iter(argv[1:])
    for arg in args:
        name, equals, value = arg.partition("=")
        if name in RAY_SETUP_OPTIONS:
            given[name] = value if equals else next(args, "")
        else:
            rest.append(arg)
    if given.get("--language") != "PYTHON" or not rest or not is_ray_script(rest[0], RAY_WORKER):
        return None
    try:
        context = json.loads(given.get("--serialized-runtime-env-context") or "{}")
    except ValueError:
        return None
    env_vars = context.get("env_vars") or {}
    if (context.get("command_prefix") or context.get("override_worker_entrypoint")
            or context.get("py_executable") not in (None, python) or context.get("java_jars")
            or any("$" in value for value in env_vars.values())):
        return None
    return Command("script", rest[0], rest[1:], env_vars=tuple(sorted(env_vars.items())))


def is_ray_script(path: str, name: str) -> bool:
    return os.path.dirname(path).endswith(RAY_WORKERS) and os.path.basename(path) == name


def run(command: Command) -> int:
    """Run ``command`` in this process as ``python`` would, in a ``__main__`` of its own; its exit status."""
    if command.target == "pytest":
        import pytest

        try:  # what `python -m pytest` calls (pytest.console_main warns that it is not for programmatic use)
            from _pytest.config import _console_main as console_main
        except ImportError:  # pytest before 9.1
            console_main = pytest.console_main
        sys.argv = [pytest.__file__, *command.args]
        return int(console_main())
    if command.kind == "script":
        sys.argv = [command.target, *command.args]
        runpy.run_path(command.target, run_name="__main__")
        return 0
    main = types.ModuleType("__main__")
    main.__dict__["__builtins__"] = builtins
    sys.modules["__main__"] = main
    if command.kind == "module":
        sys.argv = ["-m", *command.args]
        runpy._run_module_as_main(command.target)  # type: ignore[attr-defined]  # what python -m calls
    else:
        sys.argv = ["-c", *command.args]
        exec(compile(command.target, "<string>", "exec"), main.__dict__)
    return 0


def take_thread_count_at_torch_import(server_threads: str | None) -> None:
    """Give torch the intra-op thread count ``OMP_NUM_THREADS`` holds when this run first imports torch, as a fresh
    interpreter's torch takes it then: from the start (torchrun's workers), or set after it (a Ray worker sets it
    for its task's CPUs, before a task's code imports torch). The server's own count stays where the variable is as
    the server had it."""
    original = builtins.__import__

    def first_import(name: str, *args: Any, **kwargs: Any) -> Any:
        level = args[3] if len(args) > 3 else kwargs.get("level", 0)
        if level == 0 and (name == "torch" or name.startswith("torch.")):
            builtins.__import__ = original
            threads = os.environ.get(THREADS)
            count = thread_count(threads)
            if threads != server_threads and count is not None:
                import torch

                torch.set_num_threads(count)
        return original(name, *args, **kwargs)

    builtins.__import__ = first_import


def exit_status(stop: SystemExit) -> int:
    """The status an interpreter ends with on ``stop``: its code, 0 for None, else 1 with the code printed (the rule
    ``pytest_dmlbench.world.scripts`` applies to a rank's script; the server imports nothing of the plugin)."""
    if stop.code is None:
        return 0
    if isinstance(stop.code, int):
        return stop.code
    print(stop.code, file=sys.stderr)
    return 1


class Server:
    """The server's state: its socket, the launcher its children see as ``sys.executable``, the descriptors a
    child must not keep, and the runs it waits for."""

    def __init__(self, folder: str) -> None:
        self.folder = folder  # the client's, for the socket and the launcher; it outlives every run's TMPDIR
        self.env = dict(os.environ)
        given = set(path_entries(self.env)) | {os.path.abspath(p) for p in path_entries(self.env)}
        self.base_path = [entry for entry in sys.path[1:] if entry not in given]  # without the server's PYTHONPATH
        self.socket_path = os.path.join(self.folder, "socket")
        self.listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.listener.bind(self.socket_path)
        self.listener.listen(16)
        self.launcher = os.path.join(self.folder, LAUNCHER)
        write_command(self.launcher, [sys.executable, "-I", "-S", SHIM, self.socket_path, sys.executable])
        # for scripts that start `python` and `pytest` from PATH
        os.mkdir(os.path.join(self.folder, "bin"))
        write_command(os.path.join(self.folder, "bin", "python"), [self.launcher])
        write_command(os.path.join(self.folder, "bin", "pytest"), [self.launcher, "-m", "pytest"])
        self.selector = selectors.DefaultSelector()
        self.waiting: dict[int, tuple[int, socket.socket | None]] = {}  # pidfd -> (pid, the shim's connection)
        self.stdin_buffer = b""

    def own_fds(self) -> list[int]:
        """What a child closes: the socket, the selector, the pidfds and shim connections of other runs."""
        conns = [conn.fileno() for _, conn in self.waiting.values() if conn is not None]
        return [self.listener.fileno(), self.selector.fileno(), *self.waiting, *conns]

    def become(self, command: Command, cwd: str, env: dict[str, str]) -> int:
        """In a forked child: run ``command`` as ``python`` would in ``cwd`` with ``env``, exiting as a process
        does."""
        os.chdir(cwd)
        os.environ.clear()
        os.environ.update(env)
        tempfile.tempdir = None  # TMPDIR is read again
        first = {"module": cwd, "code": "", "script": os.path.dirname(os.path.realpath(command.target))}[command.kind]
        sys.path[:] = [first, *path_entries(env), *self.base_path]  # as python puts them, with that PYTHONPATH
        importlib.invalidate_caches()
        sys.executable = self.launcher  # what this run starts with `python` is forked too, where it can be
        if command.no_bytecode:
            sys.dont_write_bytecode = True
        take_thread_count_at_torch_import(self.env.get(THREADS))
        if command.unbuffered or env.get("PYTHONUNBUFFERED"):  # as python -u: no buffer under the text layer
            for fd, name in ((1, "stdout"), (2, "stderr")):
                old = getattr(sys, name)
                setattr(sys, name, io.TextIOWrapper(io.FileIO(fd, "w", closefd=False), encoding=old.encoding,
                                                    errors=old.errors, write_through=True))
        try:
            code = run(command)
        except SystemExit as stop:
            code = exit_status(stop)
        except BaseException:  # as an interpreter reports an uncaught exception: its traceback, status 1
            traceback.print_exc()
            code = 1
        sys.stdout.flush()
        sys.stderr.flush()
        threading._shutdown()  # type: ignore[attr-defined]  # as an interpreter's exit waits for its threads
        atexit._run_exitfuncs()
        sys.stdout.flush()
        sys.stderr.flush()
        return code

    def fork(self, setup: Any, command: Command, cwd: str, env: dict[str, str]) -> int:
        """Fork a child that runs ``setup()`` (its descriptors) and then the run; the child's pid."""
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:
            code = 1
            try:
                for fd in self.own_fds():
                    os.close(fd)
                setup()
                code = self.become(command, cwd, env)
            finally:
                os._exit(code)
        return pid

    def wait_for(self, pid: int, conn: socket.socket | None) -> None:
        pidfd = os.pidfd_open(pid)
        self.waiting[pidfd] = (pid, conn)
        self.selector.register(pidfd, selectors.EVENT_READ, "exited")

    def serve_inner_run(self, request: dict[str, Any]) -> None:
        def setup() -> None:
            os.setpgid(0, 0)
            null = os.open(os.devnull, os.O_RDONLY)
            os.dup2(null, 0)
            os.close(null)
            for fd, path in ((1, request["out"]), (2, request["err"])):
                target = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
                os.dup2(target, fd)
                os.close(target)

        pid = self.fork(setup, Command("module", "pytest", request["args"]), request["cwd"], request["env"])
        answer(sys.stdout, {"pid": pid})
        self.wait_for(pid, None)

    def serve_shim(self, conn: socket.socket) -> None:
        """A shim's request: its message, then its descriptors (each to take at the number it lists), its lifeline
        last."""
        data, fds, _, _ = socket.recv_fds(conn, 1 << 16, MAX_FDS)
        while data and not data.endswith(b"\n"):
            more = conn.recv(1 << 16)
            if not more:
                break
            data += more
        if not data.endswith(b"\n"):  # the shim ended before it had asked: nothing to serve
            for fd in fds:
                os.close(fd)
            conn.close()
            return
        request = json.loads(data)
        command = parse_command(request["args"], request["python"])
        env = request["env"] if command is None else {**request["env"], **dict(command.env_vars)}
        blocking = [] if command is None else unforkable_variables(env, self.env)
        if command is None or blocking or len(fds) != len(request["fds"]) + 1:
            log_refusal(request["args"], "not a command it forks" if command is None else
                        f"start-up variables differ: {', '.join(blocking)}" if blocking else "descriptors missing")
            for fd in fds:
                os.close(fd)
            with contextlib.suppress(OSError):  # a shim gone meanwhile needs no answer
                answer_socket(conn, {"forked": False})
            conn.close()
            return

        def setup() -> None:
            conn.close()  # the server's end of this request: the shim's reply comes from the server alone
            try:  # the shim's process group, as the server it stands for would be in
                os.setpgid(0, request["pgid"])
            except OSError:
                os.setpgid(0, 0)
            # all out of the way of the numbers they go to, then each to its number; the lifeline stays above
            floor = max([*request["fds"], *fds]) + 1
            *moved, lifeline = [fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, floor) for fd in fds]
            for fd in fds:
                os.close(fd)
            for source, target in zip(moved, request["fds"], strict=True):
                os.dup2(source, target)
                os.close(source)
            # killed when the shim ends: its end of the lifeline closes, and the kernel sends SIGIO (whose default
            # action ends a process) to this child
            fcntl.fcntl(lifeline, fcntl.F_SETOWN, os.getpid())
            fcntl.fcntl(lifeline, fcntl.F_SETFL, fcntl.fcntl(lifeline, fcntl.F_GETFL) | os.O_ASYNC)
            if select.select([lifeline], [], [], 0)[0]:  # the shim ended before the signal was armed
                os._exit(1)

        pid = self.fork(setup, command, request["cwd"], env)
        for fd in fds:
            os.close(fd)
        with contextlib.suppress(OSError):  # a shim gone meanwhile: its child ends by the lifeline, and is reaped
            answer_socket(conn, {"forked": True, "pid": pid})
        self.wait_for(pid, conn)

    def reap(self, pidfd: int) -> None:
        pid, conn = self.waiting.pop(pidfd)
        self.selector.unregister(pidfd)
        os.close(pidfd)
        _, status = os.waitpid(pid, 0)
        reply = {"returncode": os.waitstatus_to_exitcode(status)}
        if conn is None:
            answer(sys.stdout, reply)
        else:
            with contextlib.suppress(OSError):  # the shim is gone (killed): nobody waits for this run's status
                answer_socket(conn, reply)
            conn.close()

    def stdin_lines(self) -> list[str] | None:
        """The complete request lines read from stdin; None when stdin has closed."""
        chunk = os.read(0, 1 << 16)
        if not chunk:
            return None
        self.stdin_buffer += chunk
        *lines, self.stdin_buffer = self.stdin_buffer.split(b"\n")
        return [line.decode() for line in lines if line.strip()]

    def serve(self) -> None:
        self.selector.register(0, selectors.EVENT_READ, "stdin")
        self.selector.register(self.listener, selectors.EVENT_READ, "socket")
        answer(sys.stdout, {"ready": 1})  # the client's first run waits for this, not its own timeout
        while True:
            for key, _ in self.selector.select():
                if key.data == "stdin":
                    lines = self.stdin_lines()
                    if lines is None:
                        return
                    for line in lines:
                        self.serve_inner_run(json.loads(line))
                elif key.data == "socket":
                    conn, _ = self.listener.accept()
                    self.serve_shim(conn)
                else:
                    self.reap(int(key.fd))

    def close(self) -> None:
        self.listener.close()
        # the folder is the client's to remove


def write_command(path: str, command: list[str]) -> None:
    """An executable at ``path`` that runs ``command`` with its own arguments after it."""
    with open(path, "w") as script:
        script.write(f"#!/bin/sh\nexec {shlex.join(command)} \"$@\"\n")
    os.chmod(path, 0o755)


def answer(stream: Any, message: dict[str, Any]) -> None:
    stream.write(json.dumps(message) + "\n")
    stream.flush()


def answer_socket(conn: socket.socket, message: dict[str, Any]) -> None:
    conn.sendall((json.dumps(message) + "\n").encode())


def main() -> None:
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
    server = Server(sys.argv[1])
    try:
        server.serve()
    finally:
        server.close()


if __name__ == "__main__":
    main()
