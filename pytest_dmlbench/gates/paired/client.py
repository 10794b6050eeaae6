"""A's handle on a block server: the pytest process that runs REF's cases in REF's worktree and serves
blocks (B), and its twin that serves the working tree's blocks (A's blocks), started the same way so that
the rank processes of both sides run the same sequence of work."""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from pytest_dmlbench.errors import RefError
from pytest_dmlbench.gates.paired.protocol import (
    FDS_ENV,
    FIRST_PLUGIN_VERSION,
    LEGACY_SERVER_PLUGIN,
    PROTOCOL_VERSION,
    SERVER_PLUGIN,
    BlockAnswer,
    BlockRequest,
    Channel,
    Hello,
    ProtocolError,
)

HELLO_TIMEOUT_S = 600.0  # REF's collection plus its rank start-up, on a loaded machine
PROCESS_END_WAIT_S = 1.0  # after a broken channel: how long B's process may take to be seen ended
LOG_TAIL_CHARS = 4000


@dataclass(frozen=True)
class RefLaunch:
    """How to start B: where, with which arguments, and which ``sys.path`` entries go first."""

    worktree: Path
    repo_root: Path  # the user's repository (A's tree)
    cwd: Path
    args: Sequence[str]
    log_path: Path
    label: str  # REF as the user gave it, with its commit
    side: str = ""  # how messages name this server; "REF <label>" when empty
    tree_first: bool = True  # the worktree goes first on PYTHONPATH (REF's code); False: A's own sys.path
    environment: tuple[tuple[str, str], ...] = ()  # variables set for the server, its zygote and its ranks

    @property
    def speaker(self) -> str:
        return self.side or f"REF {self.label}"


def python_path(worktree: Path, existing: str | None) -> str:
    """REF's tree first (its ``pytest_dmlbench`` and its code under test win over installed copies)."""
    entries = [str(worktree)]
    if (worktree / "src").is_dir():
        entries.append(str(worktree / "src"))
    if existing:
        entries.append(existing)
    return os.pathsep.join(entries)


def module_file(module: str) -> Path:
    """The file of a module of the package, relative to the package's folder
    (``pytest_dmlbench.block_server.plugin`` -> ``block_server/plugin.py``)."""
    return Path(*module.split(".")[1:]).with_suffix(".py")


def server_plugin(launch: RefLaunch) -> str:
    """The module path of the block server that ``launch`` starts. B imports REF's copy of pytest_dmlbench when
    REF's tree holds one: a copy that predates the block server's own folder has it at the older path only.
    Otherwise (REF's tree without the plugin, or A's own server) the installed copy serves, at the current path."""
    package = launch.worktree / "pytest_dmlbench"
    if (launch.tree_first and not (package / module_file(SERVER_PLUGIN)).is_file()
            and (package / module_file(LEGACY_SERVER_PLUGIN)).is_file()):
        return LEGACY_SERVER_PLUGIN
    return SERVER_PLUGIN


def too_old_hint(worktree: Path) -> str | None:
    """What to say when REF's tree holds a pytest-dmlbench that cannot serve blocks (B imports REF's copy)."""
    package = worktree / "pytest_dmlbench"
    servers = (package / module_file(module) for module in (SERVER_PLUGIN, LEGACY_SERVER_PLUGIN))
    if not (package / "__init__.py").is_file() or any(server.is_file() for server in servers):
        return None
    found = re.search(r"__version__\s*=\s*[\"']([^\"']+)", (package / "__init__.py").read_text(errors="replace"))
    return (
        f"its pytest-dmlbench ({found.group(1) if found else 'version unknown'}) has no paired server; "
        f"--dmlbench-against needs paired protocol {PROTOCOL_VERSION} (pytest-dmlbench {FIRST_PLUGIN_VERSION} "
        "or later) on the REF side. Choose a REF at or after the commit that added it, or compare with stored "
        "baselines instead."
    )


class RefProcess:
    """B, started once per run; every world it starts stays alive until :meth:`close`."""

    def __init__(self, launch: RefLaunch) -> None:
        self.launch = launch
        self.process: subprocess.Popen[bytes] | None = None
        self.channel: Channel | None = None
        self.hello: Hello | None = None
        self.restarts = 0
        self.log_named = False  # a message named the log, so it outlives the run; else close removes it
        self.end_requested = False

    def command(self) -> list[str]:
        return [sys.executable, "-m", "pytest", "-p", server_plugin(self.launch), *self.launch.args]

    def start(self) -> None:
        to_b_read, to_b_write = os.pipe()
        from_b_read, from_b_write = os.pipe()
        env = dict(os.environ)
        env[FDS_ENV] = f"{to_b_read},{from_b_write}"
        env.update(self.launch.environment)
        if self.launch.tree_first:
            env["PYTHONPATH"] = python_path(self.launch.worktree, env.get("PYTHONPATH"))
        self.launch.log_path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.launch.log_path, "wb") as log:
            self.process = subprocess.Popen(
                self.command(), cwd=self.launch.cwd, env=env, stdin=subprocess.DEVNULL, stdout=log,
                stderr=subprocess.STDOUT, pass_fds=(to_b_read, from_b_write),
            )
        os.close(to_b_read)
        os.close(from_b_write)
        self.channel = Channel(from_b_read, to_b_write)
        self.end_requested = False

    @property
    def stopped(self) -> bool:
        """Whether this server served (said hello) and has stopped since (killed after a block failed to
        answer, or crashed)."""
        return self.hello is not None and self.channel is None

    def restart(self) -> Hello:
        """A fresh server in place of one that stopped: its log is kept beside the new one (``.1``,
        ``.2``... before the suffix), then the same command starts and says hello (RefError when not)."""
        self.kill()
        self.restarts += 1
        self.log_named = True
        log = self.launch.log_path
        if log.exists():
            log.replace(log.with_name(f"{log.stem}.{self.restarts}{log.suffix}"))
        self.hello = None
        self.start()
        return self.wait_hello()

    def log_tail(self) -> str:
        try:
            text = self.launch.log_path.read_text(errors="replace")
        except OSError:
            return ""
        return text[-LOG_TAIL_CHARS:]

    def _failure(self, problem: str) -> RefError:
        log = self.log_tail()
        hint = too_old_hint(self.launch.worktree)
        what = f"{self.launch.speaker} could not serve blocks: {hint or self._ended() or problem}"
        return RefError(f"{what}\nREF's pytest output ({self.named_log()}), last part:\n{log.rstrip()}")

    def _ended(self) -> str | None:
        """How B's process ended, when it has (a kill, a crash, an exit), else None."""
        if self.process is None:
            return None
        try:
            code = self.process.wait(PROCESS_END_WAIT_S)
        except subprocess.TimeoutExpired:
            return None
        if code < 0:
            try:
                name = signal.Signals(-code).name
            except ValueError:
                name = f"signal {-code}"
            return f"its pytest process was killed by {name}"
        return f"its pytest process exited with code {code}"

    def offers(self, feature: Literal["in_process_blocks", "budgeted_experiments", "profiles_blocks",
                                      "redraws_worlds"]) -> bool:
        """Whether this server's hello announced ``feature`` (a server that predates it does not)."""
        return self.hello is not None and bool(self.hello.get(feature, False))

    @property
    def plugin_version(self) -> str:
        """The server's pytest-dmlbench version, as its hello gave it ("?" before the hello)."""
        return self.hello["plugin_version"] if self.hello is not None else "?"

    def wait_hello(self, timeout_s: float = HELLO_TIMEOUT_S) -> Hello:
        """B's announcement; RefError (with B's output) when B cannot take part."""
        if self.hello is not None:
            return self.hello
        assert self.channel is not None
        try:
            message = self.channel.receive(timeout_s)
        except ProtocolError as exc:
            error = self._failure(str(exc))
            self.kill()
            raise error from None
        if message["type"] == "error":
            error = self._failure(str(message.get("message")))
            self.kill()
            raise error
        if message["type"] != "hello" or message.get("protocol") != PROTOCOL_VERSION:
            self.kill()
            raise RefError(
                f"{self.launch.speaker} speaks paired protocol {message.get('protocol')!r} "
                f"(pytest-dmlbench {message.get('plugin_version')}); this run needs protocol {PROTOCOL_VERSION} "
                f"(pytest-dmlbench {FIRST_PLUGIN_VERSION} or later). Choose a REF whose pytest-dmlbench speaks it."
            )
        self.hello = message
        return message

    def block(self, nodeid: str, rounds: int, warmup: int, iterations: int, timeout_s: float,
              whole_experiment: bool = False, profile: bool = False, fresh_world: bool = False) -> BlockAnswer:
        """Run one block of ``nodeid`` in B; RefError when B went away or broke the protocol.
        ``whole_experiment``: experiments train in full; ``profile``: the answer carries where the block's
        time went (``measure/op_profile.py``); ``fresh_world``: the block runs on a newly started world. A
        server that predates any of them ignores it."""
        if self.channel is None:
            raise RefError(f"{self.launch.speaker} stopped serving earlier in this run (see the first case "
                           f"that reported it); its pytest output is in {self.named_log()}")
        try:
            request: BlockRequest = {"type": "block", "nodeid": nodeid, "rounds": rounds, "warmup": warmup,
                                     "iterations": iterations}
            if whole_experiment:
                request["whole_experiment"] = True
            if profile:
                request["profile"] = True
            if fresh_world:
                request["fresh_world"] = True
            self.channel.send(request)
            message = self.channel.receive(timeout_s)
        except (ProtocolError, OSError) as exc:
            error = self._failure(str(exc))
            self.kill()
            raise error from None
        if message["type"] != "result" or message.get("nodeid") != nodeid:
            error = self._failure(f"unexpected answer {str(message)[:300]}")
            self.kill()
            raise error
        return message

    def named_log(self) -> Path:
        """The log's path, for a message that names it: the log is then kept after the run."""
        self.log_named = True
        return self.launch.log_path

    def request_end(self) -> None:
        """Ask the server to end without waiting for it: it tears its session down (its worlds, its
        plugins' summaries) while the caller goes on; :meth:`close` then waits. Asked once."""
        if self.process is None or self.channel is None or self.end_requested or self.process.poll() is not None:
            return
        self.end_requested = True
        with contextlib.suppress(OSError):  # it has gone meanwhile: close finds how it ended
            self.channel.send({"type": "end"})

    def close(self, timeout_s: float = 30.0) -> None:
        """End the server (asking it, unless :meth:`request_end` did) and wait for it; its log goes with it
        unless a message named the log or the server did not end cleanly (then the log stays for the user to
        read)."""
        if self.process is None:
            return
        self.request_end()
        try:
            self.process.wait(timeout_s)
        except subprocess.TimeoutExpired:
            self.kill()
        self._release()
        if self.process.returncode == 0 and not self.log_named:
            self.launch.log_path.unlink(missing_ok=True)
            with contextlib.suppress(OSError):  # the folder made for the log, when nothing else is in it
                self.launch.log_path.parent.rmdir()

    def kill(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait()
        self._release()

    def _release(self) -> None:
        if self.channel is not None:
            self.channel.close()
            self.channel = None
