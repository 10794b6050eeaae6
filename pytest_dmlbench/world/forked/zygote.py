"""The zygote: a single-threaded copy of the pytest process, forked right after collection.

It holds every collected case (so ranks need no re-import and keep pytest's assertion rewriting), never
runs torch compute or initialises CUDA (it counts devices in a child of its own: ``world.cuda_count``), and
forks rank processes on request. It reaps them and reports each exit status, since only a process's parent
can learn how it ended.
"""

from __future__ import annotations

import os
import pickle
import select
import signal
import socket
import sys
import traceback
from typing import Any, NoReturn

from pytest_dmlbench.errors import WorldError
from pytest_dmlbench.world.forked.lifetime import detach_from_terminal_signals, die_with_parent
from pytest_dmlbench.world.messages import Exited, Shutdown, Spawned, SpawnWorld, ZygoteReady
from pytest_dmlbench.world.registry import CaseRegistry

_MAX_MESSAGE = 1 << 20
_MAX_FDS = 256
_REAP_INTERVAL_S = 0.05


def _send(sock: socket.socket, message: Any, fds: list[int] | None = None) -> None:
    data = pickle.dumps(message)
    if fds:
        socket.send_fds(sock, [data], fds)
    else:
        sock.sendall(data)


class ZygoteHandle:
    """The parent's side of the zygote: ask for worlds, learn how rank processes ended."""

    def __init__(self, sock: socket.socket, pid: int) -> None:
        self.sock = sock
        self.pid = pid
        self.exits: dict[int, int] = {}
        self._cuda_devices: int | None = None
        self._count_problem = ""

    @classmethod
    def start(cls, registry: CaseRegistry, log_path: str) -> ZygoteHandle:
        parent_sock, child_sock = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        parent_pid = os.getpid()
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:  # pragma: no cover - runs in the child
            try:
                parent_sock.close()
                _zygote_main(child_sock, registry, parent_pid, log_path)
            finally:
                os._exit(1)
        child_sock.close()
        return cls(parent_sock, pid)

    def spawn(self, spec: Any, rank_fds: list[int], timeout_s: float) -> list[int]:
        """Fork one rank per fd; returns their pids."""
        _send(self.sock, SpawnWorld(spec), rank_fds)
        while True:
            message = self._receive(timeout_s)
            if message is None:
                raise WorldError(f"the zygote process (pid {self.pid}) did not fork the ranks within {timeout_s:.0f} s")
            if isinstance(message, Spawned):
                return message.pids

    def cuda_devices(self, timeout_s: float = 120.0) -> int:
        """CUDA devices visible to the ranks (the zygote counts them once torch is loaded)."""
        deadline = _monotonic() + timeout_s
        while self._cuda_devices is None:
            remaining = deadline - _monotonic()
            if remaining <= 0:
                raise WorldError(f"the zygote process (pid {self.pid}) did not load torch within {timeout_s:.0f} s")
            self._receive(remaining)
        if self._count_problem:
            raise WorldError(self._count_problem)
        return self._cuda_devices

    def exit_status(self, pid: int, timeout_s: float) -> int | None:
        """The wait status of rank ``pid`` once the zygote has reaped it, or None if it has not ended."""
        deadline = _monotonic() + timeout_s
        while pid not in self.exits:
            remaining = deadline - _monotonic()
            if remaining <= 0 or self._receive(remaining) is None:
                break
        return self.exits.get(pid)

    def _receive(self, timeout_s: float) -> Any:
        ready, _, _ = select.select([self.sock], [], [], max(0.0, timeout_s))
        if not ready:
            return None
        data = self.sock.recv(_MAX_MESSAGE)
        if not data:
            raise WorldError(f"the zygote process (pid {self.pid}) ended unexpectedly")
        message = pickle.loads(data)
        if isinstance(message, Exited):
            self.exits[message.pid] = message.status
        elif isinstance(message, ZygoteReady):
            self._cuda_devices = message.cuda_devices
            self._count_problem = message.count_problem
        return message

    def close(self) -> None:
        """Stop the zygote (which kills any rank it still has) and reap it."""
        try:
            _send(self.sock, Shutdown())
        except OSError:
            pass
        self.sock.close()
        for _ in range(100):
            done, _status = os.waitpid(self.pid, os.WNOHANG)
            if done:
                return
            select.select([], [], [], 0.01)
        os.kill(self.pid, signal.SIGKILL)
        os.waitpid(self.pid, 0)


def _monotonic() -> float:
    import time

    return time.monotonic()


def _zygote_main(sock: socket.socket, registry: CaseRegistry, parent_pid: int, log_path: str) -> NoReturn:
    die_with_parent(parent_pid)
    detach_from_terminal_signals()
    log_fd = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    os.dup2(log_fd, 1)
    os.dup2(log_fd, 2)
    os.close(log_fd)
    import torch.distributed  # noqa: F401 - loaded once here so that every rank starts with it

    import pytest_dmlbench.measure.bench  # noqa: F401 - what every rank's first case would otherwise import
    from pytest_dmlbench.world.cuda_count import cuda_device_count
    from pytest_dmlbench.world.execute import warm_up
    from pytest_dmlbench.world.forked.rank import rank_main

    warm_up()

    try:
        _send(sock, ZygoteReady(cuda_device_count()))
    except WorldError as exc:
        _send(sock, ZygoteReady(0, str(exc)))

    children: set[int] = set()
    my_pid = os.getpid()
    try:
        while True:
            ready, _, _ = select.select([sock], [], [], _REAP_INTERVAL_S)
            if ready:
                data, fds, _flags, _addr = socket.recv_fds(sock, _MAX_MESSAGE, _MAX_FDS)
                if not data:
                    break
                message = pickle.loads(data)
                if isinstance(message, Shutdown):
                    break
                if isinstance(message, SpawnWorld):
                    pids = []
                    for rank, fd in enumerate(fds):
                        pid = os.fork()
                        if pid == 0:
                            sock.close()
                            for other in fds:
                                if other != fd:
                                    os.close(other)
                            rank_main(message.spec, rank, fd, registry, my_pid)
                        pids.append(pid)
                        children.add(pid)
                    for fd in fds:
                        os.close(fd)
                    _send(sock, Spawned(message.spec.world_id, pids))
            while children:
                pid, status = os.waitpid(-1, os.WNOHANG)
                if pid == 0:
                    break
                children.discard(pid)
                _send(sock, Exited(pid, status))
    except BaseException:
        traceback.print_exc()
    for pid in children:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    os._exit(0)
