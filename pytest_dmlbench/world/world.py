"""One running world, seen from the parent: start it, run a case on every rank, collect what happened."""

from __future__ import annotations

import os
import signal
import time
from dataclasses import dataclass
from multiprocessing import Pipe
from multiprocessing.connection import Connection, wait
from pathlib import Path
from typing import cast

from pytest_dmlbench.errors import WorldError
from pytest_dmlbench.measure.rounds import BlockBudget
from pytest_dmlbench.world.agreement import rebuild_reasons, unmatched_collectives
from pytest_dmlbench.world.lifetime import describe_status
from pytest_dmlbench.world.messages import CaseRequest, RankOutcome, Ready, Shutdown, WorldSpec
from pytest_dmlbench.world.rank import rank_log_path, rank_stack_path
from pytest_dmlbench.world.zygote import ZygoteHandle

# After one rank has failed or died, how long the others get to report before they count as stuck.
FAILURE_GRACE_S = 1.0
# How long a SIGUSR1 stack dump may take to appear.
STACK_DUMP_WAIT_S = 0.5


@dataclass
class RankReport:
    """What one rank did during a case."""

    rank: int
    outcome: RankOutcome | None = None
    died: str | None = None
    stuck: bool = False
    stack: str = ""
    output: str = ""


@dataclass
class CaseOutcome:
    """Every rank's report for one case (the parent's view), and whether the world survived it."""

    ranks: list[RankReport]
    elapsed_s: float
    timed_out: bool = False
    world_broken: bool = False
    timeout_s: float = 0.0
    unmatched: str = ""  # the ranks issued different numbers of collectives (see world.agreement)
    rebuilt_because: str = ""  # the case destroyed/replaced the default group or left unrestorable state

    @property
    def passed(self) -> bool:
        return not self.unmatched and all(r.outcome is not None and r.outcome.status == "passed"
                                          for r in self.ranks)

    def check_agreement(self) -> None:
        """Fill ``unmatched`` and ``rebuilt_because`` from the outcomes; either one breaks the world."""
        outcomes = [r.outcome for r in self.ranks if r.outcome is not None]
        if len(outcomes) == len(self.ranks):
            self.unmatched = unmatched_collectives(outcomes)
        self.rebuilt_because = rebuild_reasons(outcomes)
        if self.unmatched or self.rebuilt_because:
            self.world_broken = True


class World:
    """Rank processes of one (backend, world size), kept for many cases."""

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

    def run(self, nodeid: str, *, seed: int, registry_args: tuple[str, ...], pickled_args: bytes,
            measure_memory: bool, timeout_s: float, block: BlockBudget | None = None) -> CaseOutcome:
        """Send the case to every rank and collect each rank's outcome (or death, or stack when stuck)."""
        self._case_counter += 1
        case_id = self._case_counter
        message = CaseRequest(case_id, nodeid, seed, registry_args, pickled_args, measure_memory, block)
        reports = [RankReport(rank) for rank in range(self.spec.world_size)]
        begin = time.monotonic()
        for conn in self.conns:
            conn.send(message)
        pending = dict(enumerate(self.conns))
        deadline = begin + timeout_s
        timed_out = False
        while pending:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                timed_out = deadline == begin + timeout_s
                break
            ready = wait(list(pending.values()), timeout=remaining)
            for obj in ready:
                rank = next(r for r, c in pending.items() if c is obj)
                conn = pending.pop(rank)
                try:
                    outcome = conn.recv()
                except (EOFError, OSError):
                    status = self.zygote.exit_status(self.pids[rank], 2.0)
                    reports[rank].died = describe_status(status) if status is not None else "connection lost"
                    self.broken = True
                    deadline = min(deadline, time.monotonic() + FAILURE_GRACE_S)
                    continue
                assert isinstance(outcome, RankOutcome) and outcome.case_id == case_id, outcome
                reports[rank].outcome = outcome
                if outcome.status != "passed":
                    deadline = min(deadline, time.monotonic() + FAILURE_GRACE_S)
        if pending:
            self.broken = True
            for rank in pending:
                reports[rank].stuck = True
            self._dump_stacks(reports, list(pending))
        elif any(r.outcome is None or r.outcome.status == "failed" for r in reports):
            # Ranks that failed may have left collectives unmatched: never reuse such a world.
            self.broken = True
        for report in reports:
            log = rank_log_path(self.spec.out_dir, report.rank)
            report.output = self._read_new(log, self._log_offsets, report.rank)
        run = CaseOutcome(reports, time.monotonic() - begin, timed_out=timed_out, world_broken=self.broken,
                          timeout_s=timeout_s)
        run.check_agreement()
        if run.world_broken:
            self.kill()
        return run

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
