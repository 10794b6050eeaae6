"""One running world, seen from the parent: start it, run a case on every rank, collect what happened."""

from __future__ import annotations

import os
import signal
import time
from multiprocessing import Pipe
from multiprocessing.connection import Connection, wait
from pathlib import Path
from typing import Any, cast

from pytest_dmlbench.errors import WorldError
from pytest_dmlbench.world.dispatch import CaseDispatch, RankLost
from pytest_dmlbench.world.forked.lifetime import describe_status
from pytest_dmlbench.world.forked.rank import rank_log_path, rank_stack_path
from pytest_dmlbench.world.forked.zygote import ZygoteHandle
from pytest_dmlbench.world.messages import CaseRequest, RankOutcome, Ready, Shutdown, WorldSpec
from pytest_dmlbench.world.outcome import RankReport

# How long a SIGUSR1 stack dump may take to appear.
STACK_DUMP_WAIT_S = 0.5


class World(CaseDispatch):
    """Rank processes of one (backend, world size), kept for many cases."""

    forwards_warnings = True

    def __init__(self, spec: WorldSpec, zygote: ZygoteHandle) -> None:
        self.spec = spec
        self.zygote = zygote
        self.conns: list[Connection] = []
        self.pids: list[int] = []
        self.start_s = float("nan")
        self.broken = False
        self._log_offsets = [0] * spec.world_size
        self._stack_offsets = [0] * spec.world_size
        self._case_counter = 0

    def start(self) -> None:
        """Fork the ranks and wait until every one has joined the process group."""
        begin = time.perf_counter()
        Path(self.spec.out_dir).mkdir(parents=True, exist_ok=True)
        parent_ends, rank_ends = [], []
        for _ in range(self.spec.world_size):
            mine, theirs = Pipe(duplex=True)
            parent_ends.append(mine)
            rank_ends.append(theirs)
        try:
            self.pids = self.zygote.spawn(self.spec, [c.fileno() for c in rank_ends], self.spec.init_timeout_s)
        finally:
            for conn in rank_ends:
                conn.close()
        self.conns = parent_ends
        pending = {id(c): rank for rank, c in enumerate(self.conns)}
        deadline = time.monotonic() + self.spec.init_timeout_s
        while pending:
            remaining = deadline - time.monotonic()
            ready = wait([c for c in self.conns if id(c) in pending], timeout=max(0.0, remaining))
            if not ready:
                self.kill()
                waiting = ", ".join(str(rank) for rank in sorted(pending.values()))
                raise WorldError(
                    f"world of {self.spec.world_size} rank(s) ({self.spec.backend}) did not start within "
                    f"{self.spec.init_timeout_s:.0f} s; rank(s) {waiting} never joined the process group.\n"
                    + self._all_output()
                )
            for obj in ready:
                conn = cast(Connection, obj)
                rank = pending.pop(id(conn))
                try:
                    message = conn.recv()
                except (EOFError, OSError):
                    status = self.zygote.exit_status(self.pids[rank], 2.0)
                    self.kill()
                    how = describe_status(status) if status is not None else "ended"
                    raise WorldError(
                        f"rank {rank} (pid {self.pids[rank]}) {how} while joining the process group.\n"
                        + self._all_output()
                    ) from None
                if not isinstance(message, Ready):
                    self.kill()
                    raise WorldError(f"rank {rank} sent {message!r} instead of its ready message")
        self.start_s = time.perf_counter() - begin
        self._log_offsets = [self._size(rank_log_path(self.spec.out_dir, r)) for r in range(self.spec.world_size)]

    def _send(self, message: CaseRequest) -> dict[Any, int]:
        for conn in self.conns:
            conn.send(message)
        return {conn: rank for rank, conn in enumerate(self.conns)}

    def _ready(self, handles: list[Any], timeout_s: float) -> list[Any]:
        return list(wait(handles, timeout=timeout_s))

    def _receive(self, handle: Any, rank: int) -> tuple[RankOutcome, str | None]:
        try:
            outcome = handle.recv()
        except (EOFError, OSError):
            status = self.zygote.exit_status(self.pids[rank], 2.0)
            raise RankLost(describe_status(status) if status is not None else "connection lost") from None
        assert isinstance(outcome, RankOutcome), outcome
        return outcome, None

    def _collect_stacks(self, reports: list[RankReport], ranks: list[int]) -> None:
        self._dump_stacks(reports, ranks)

    def _collect_output(self, reports: list[RankReport]) -> None:
        for report in reports:
            log = rank_log_path(self.spec.out_dir, report.rank)
            report.output = self._read_new(log, self._log_offsets, report.rank)

    def _dump_stacks(self, reports: list[RankReport], ranks: list[int]) -> None:
        for rank in ranks:
            try:
                os.kill(self.pids[rank], signal.SIGUSR1)
            except ProcessLookupError:
                reports[rank].died = "ended"
        deadline = time.monotonic() + STACK_DUMP_WAIT_S
        for rank in ranks:
            path = rank_stack_path(self.spec.out_dir, rank)
            while time.monotonic() < deadline and self._size(path) <= self._stack_offsets[rank]:
                time.sleep(0.01)
        time.sleep(0.05)  # let a dump that has started finish
        for rank in ranks:
            reports[rank].stack = self._read_new(rank_stack_path(self.spec.out_dir, rank), self._stack_offsets, rank)

    @staticmethod
    def _size(path: str) -> int:
        try:
            return os.path.getsize(path)
        except OSError:
            return 0

    @staticmethod
    def _read_new(path: str, offsets: list[int], rank: int) -> str:
        try:
            with open(path, "rb") as handle:
                handle.seek(offsets[rank])
                data = handle.read()
        except OSError:
            return ""
        offsets[rank] += len(data)
        return data.decode("utf-8", errors="replace")

    def _all_output(self) -> str:
        parts = []
        for rank in range(self.spec.world_size):
            text = self._read_new(rank_log_path(self.spec.out_dir, rank), self._log_offsets, rank)
            if text.strip():
                parts.append(f"--- rank {rank} output ---\n{text.rstrip()}")
        return "\n".join(parts)

    def kill(self) -> None:
        """SIGKILL every rank; the zygote reaps them."""
        self.broken = True
        for pid in self.pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        for conn in self.conns:
            conn.close()
        self.conns = []

    def stop(self, timeout_s: float = 2.0) -> None:
        """Ask the ranks to leave the process group and exit; kill whatever has not after ``timeout_s``."""
        if self.broken:
            self.kill()
            return
        for conn in self.conns:
            try:
                conn.send(Shutdown())
            except OSError:
                pass
        deadline = time.monotonic() + timeout_s
        for pid in self.pids:
            self.zygote.exit_status(pid, max(0.0, deadline - time.monotonic()))
        self.kill()
