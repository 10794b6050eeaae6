"""One case on every rank of a simulated world: a thread per rank, one running at a time.

The host (the calling thread) starts the ranks, watches for a rank that blocks outside the process group
and for the case's timeout, and turns what every rank did into the same :class:`CaseOutcome` the forked
worlds give, so the plugin reports it the same way.
"""

from __future__ import annotations

import logging
import random
import threading
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass, replace
from types import FrameType
from typing import Any

import torch
import torch.distributed as dist
from torch._C._distributed_c10d import HashStore

from pytest_dmlbench.measure import comm
from pytest_dmlbench.measure.dist_info import DistInfo
from pytest_dmlbench.properties.body import property_verdict, run_case_body
from pytest_dmlbench.world import adopt_group
from pytest_dmlbench.world.execute import classify, seed_everything
from pytest_dmlbench.world.guard import Unrestorable, snapshot
from pytest_dmlbench.world.messages import RankOutcome
from pytest_dmlbench.world.outcome import CaseOutcome, RankReport
from pytest_dmlbench.world.simulated import as_torchrun, rank_environ
from pytest_dmlbench.world.simulated.process_group import ACTIVE, BACKEND_NAME, register_backend
from pytest_dmlbench.world.simulated.process_state import RankProcessState
from pytest_dmlbench.world.simulated.rank_environ import RankEnviron
from pytest_dmlbench.world.simulated.rng import RankRandomState
from pytest_dmlbench.world.simulated.shared import SharedWorld, rank_ranges
from pytest_dmlbench.world.simulated.shared_tracebacks import SharedTracebacks
from pytest_dmlbench.world.simulated.thread_world import ThreadWorld, per_thread_world
from pytest_dmlbench.world.simulated.turns import WorldAborted
from pytest_dmlbench.world.thread_frames import current_frames

DEVICE = "cpu"
# A rank that holds the turn while waiting in a thread-synchronisation primitive this long is blocked on
# something only another rank could give it, which cannot run: the case is stopped and the wait reported.
BLOCKED_OUTSIDE_S = 3.0
WATCH_INTERVAL_S = 0.2
# How long ranks released by an abort get to finish before they are reported as left running.
RELEASE_GRACE_S = 2.0
_BLOCKING_FILES = ("threading.py", "queue.py", "multiprocessing")
_OWN_FILES = (__file__, run_case_body.__code__.co_filename)

Arguments = Callable[[DistInfo], dict[str, Any]]


@dataclass
class _RankResult:
    outcome: RankOutcome | None = None
    stack: str = ""  # where a rank released by an abort was waiting


@dataclass(frozen=True)
class _Settled:
    """A rank's part of the report, as it stood when the host stopped waiting for the ranks."""

    outcome: RankOutcome | None
    stack: str  # a released rank's traceback, or where a rank still running was
    running: bool  # neither ended nor released: left running in its daemon thread


def _trimmed_traceback(exc: BaseException, texts: SharedTracebacks) -> str:
    """The traceback from the case body down (this module's and the body caller's frames left out)."""
    tb = exc.__traceback__
    while tb is not None and tb.tb_frame.f_code.co_filename in _OWN_FILES:
        tb = tb.tb_next
    return texts.text(exc, tb)


def _stack_of(frame: FrameType | None) -> str:
    return "".join(traceback.format_stack(frame)) if frame is not None else ""


class SimulatedCase:
    """Runs one case body on ``world_size`` simulated ranks."""

    def __init__(self, case_id: int, func: Callable[..., Any], arguments: Arguments, *, world_size: int,
                 seed: int, timeout_s: float, communicates: bool = True, strict: bool = False) -> None:
        """``communicates=False``: the case means its ranks never to use the world's group (otherwise a passing
        case on more than one rank that never did fails, see ``as_torchrun.group_unused``). ``strict``: async
        work completes at ``wait()`` and sends when matched, as on NCCL (``pending``, ``p2p_strict``)."""
        self.case_id = case_id
        self.func = func
        self.arguments = arguments
        self.world_size = world_size
        self.seed = seed
        self.timeout_s = timeout_s
        self.communicates = communicates
        self.results = [_RankResult() for _ in range(world_size)]
        self.idents: list[int | None] = [None] * world_size
        rng = RankRandomState(world_size)
        self.process = RankProcessState(world_size)

        def on_switch(leaving: int, entering: int) -> None:
            rng.switch(leaving, entering)
            self.process.switch(leaving, entering)

        self.world = SharedWorld(world_size, on_switch, strict=strict)
        self.store = HashStore()
        self.tracebacks = SharedTracebacks()  # the released ranks' tracebacks, alike but for a few
        self.master_port = 0  # the port of the master store served while the world runs

    # -- rank side --------------------------------------------------------------------------------------------
    def _rank_main(self, rank: int, thread_world: ThreadWorld, environ: RankEnviron) -> None:
        self.idents[rank] = threading.get_ident()
        thread_world.bind()
        environ.bind(as_torchrun.rank_variables(rank, self.world_size, self.master_port, self.case_id))
        turns = self.world.turns
        result = self.results[rank]
        state = self.world.ranks[rank]
        try:
            turns.await_first_turn(rank)
            state.state = "running"
            dist.init_process_group(BACKEND_NAME, store=self.store, rank=rank, world_size=self.world_size)
            result.outcome = self._run_body(rank)
            caught = self.world.pending[rank].violation if self.world.strict else ""
            if caught and result.outcome.status == "passed":  # the case caught PendingTensorAccess and went on
                result.outcome = replace(result.outcome, status="failed",
                                         message=f"{caught} (raised on this rank and caught by the case)")
            state.state = "failed" if result.outcome.status == "failed" else "ended"
        except WorldAborted as exc:
            result.stack = _trimmed_traceback(exc, self.tracebacks)
            state.state = "released"
        except BaseException as exc:  # the harness itself failed on this rank: reported with its traceback
            result.outcome = RankOutcome(self.case_id, rank, "failed", message=str(exc),
                                         traceback=_trimmed_traceback(exc, self.tracebacks))
            state.state = "failed"
        finally:
            if self.world.strict:
                self.world.pending[rank].close()
            environ.unbind()
            turns.end(rank)

    def _run_body(self, rank: int) -> RankOutcome:
        info = DistInfo(rank, self.world_size, BACKEND_NAME, DEVICE)
        start = time.perf_counter()
        try:
            kwargs = self.arguments(info)
            seed_everything(self.seed + rank)
            with adopt_group.adopting(info, per_thread=True, stands_in_for=as_torchrun.STANDS_IN_FOR):
                run_case_body(self.func, kwargs)
        except WorldAborted:
            raise
        except BaseException as exc:
            status = classify(exc)
            return RankOutcome(self.case_id, rank, status, message=str(getattr(exc, "msg", None) or exc),
                               traceback=_trimmed_traceback(exc, self.tracebacks) if status == "failed" else "",
                               duration_s=time.perf_counter() - start, property_verdict=property_verdict(exc))
        return RankOutcome(self.case_id, rank, "passed", duration_s=time.perf_counter() - start)

    # -- host side --------------------------------------------------------------------------------------------
    def run(self) -> CaseOutcome:
        """Run every rank to its end (or to an abort) and report."""
        register_backend()
        adopt_group.install()  # before the snapshot, so the guard keeps the adopting functions
        guarded = snapshot()
        host_rng = (torch.get_rng_state(), random.getstate())
        threads_before = torch.get_num_threads()
        torch.set_num_threads(1)  # one rank computes at a time: no thread pool per rank thread
        per_thread_before = comm.set_per_thread(True)  # a rank's comm counters see only its own calls
        c10d_log = logging.getLogger("c10d-NullHandler-default")  # torch logs each failed call at debug level:
        log_level = c10d_log.level  # one line per released rank repeats the report 1024 times
        c10d_log.setLevel(logging.INFO)
        begin = time.monotonic()
        timed_out = False
        ACTIVE.world = self.world
        master_store = as_torchrun.serve_master_store()
        self.master_port = master_store.port
        try:
            with per_thread_world() as thread_world, rank_environ.installed() as environ, \
                    as_torchrun.exits_refused():
                threads = [threading.Thread(target=self._rank_main, args=(rank, thread_world, environ),
                                            daemon=True, name=f"{as_torchrun.RANK_THREAD_PREFIX}{rank}")
                           for rank in range(self.world_size)]
                for thread in threads:
                    thread.start()
                self.process.begin()
                try:
                    self.world.turns.begin()
                    timed_out = self._watch(begin)
                    grace_end = time.monotonic() + RELEASE_GRACE_S
                    for thread in threads:
                        thread.join(timeout=max(0.0, grace_end - time.monotonic()))
                    settled = self._settle()
                finally:
                    self.process.end()
        finally:
            del master_store
            ACTIVE.world = None
            comm.set_per_thread(per_thread_before)
            c10d_log.setLevel(log_level)
            torch.set_num_threads(threads_before)
            torch.set_rng_state(host_rng[0])
            random.setstate(host_rng[1])
            rebuild = ""
            try:
                guarded.restore()
            except Unrestorable as exc:
                rebuild = f"state the case changed cannot be restored ({exc})"
        return self._outcome(settled, time.monotonic() - begin, timed_out, rebuild)

    def _watch(self, begin: float) -> bool:
        """Wait for every rank to end; abort on a rank blocked outside the process group or at the timeout.
        True when the timeout stopped the case."""
        turns = self.world.turns
        seen: tuple[int, int] | None = None
        seen_since = 0.0
        while not turns.all_ended.wait(WATCH_INTERVAL_S):
            now = time.monotonic()
            if now - begin > self.timeout_s:
                turns.abort(f"the case did not finish within its {self.timeout_s:g} s timeout; "
                            f"{self._holder_text()}. Every rank's last collective: {self.world.every_rank()}")
                return True
            current = turns.current
            frame = self._frame_of(current)
            if current is None or frame is None or not frame.f_code.co_filename.endswith(_BLOCKING_FILES):
                seen = None
                continue
            key = (current, id(frame))
            if key != seen:
                seen, seen_since = key, now
            elif now - seen_since > BLOCKED_OUTSIDE_S:
                turns.abort(
                    f"rank {current} is blocked outside the process group (in {frame.f_code.co_name} of "
                    f"{frame.f_code.co_filename}) for {BLOCKED_OUTSIDE_S:g} s while holding the turn. Simulated "
                    "ranks run one at a time and switch only inside torch.distributed calls, so a rank that waits "
                    "for another rank through a queue, lock, event or barrier of its own waits forever: "
                    "synchronise through torch.distributed, or run the case with --dmlbench-launcher fork. "
                    f"Every rank's last collective: {self.world.every_rank()}")
                return False
        return False

    def _frame_of(self, rank: int | None) -> FrameType | None:
        ident = self.idents[rank] if rank is not None else None
        return current_frames().get(ident) if ident is not None else None

    def _holder_text(self) -> str:
        current = self.world.turns.current
        return "no rank holds the turn" if current is None else f"rank {current} was running"

    def _settle(self) -> list[_Settled]:
        """What every rank reported by the end of the grace, with the live stack of each that is still running.

        Taken while the ranks' own process groups still exist: a rank that runs on after that (a slow rank the
        timeout stopped) finds no group and fails for that reason alone, which must not become the report."""
        frames = current_frames()
        settled = []
        for rank, result in enumerate(self.results):
            outcome, stack = result.outcome, result.stack
            running = outcome is None and not stack
            ident = self.idents[rank]
            if running:
                stack = _stack_of(frames.get(ident) if ident is not None else None)
            settled.append(_Settled(outcome, stack, running))
        return settled

    def _outcome(self, settled: list[_Settled], elapsed: float, timed_out: bool, rebuild: str) -> CaseOutcome:
        reports = []
        left_running = []
        for rank, result in enumerate(settled):
            report = RankReport(rank, outcome=result.outcome)
            if result.outcome is None:
                report.stuck = True
                report.stack = result.stack
                if result.running:
                    left_running.append(rank)
            elif rebuild:
                report.outcome = RankOutcome(result.outcome.case_id, rank, result.outcome.status,
                                             result.outcome.message, result.outcome.traceback,
                                             result.outcome.duration_s, rebuild=rebuild)
            reports.append(report)
        if self.communicates and all(r.outcome is not None and r.outcome.status == "passed" for r in reports):
            unused = as_torchrun.group_unused(self.world_size, self.world.ranks)
            for report in reports if unused else []:
                assert report.outcome is not None
                report.outcome = replace(report.outcome, status="failed", message=unused)
        reason = self.world.turns.abort_reason
        if left_running:
            reason += (f" ({rank_ranges(left_running)} could not be stopped and "
                       f"{'is' if len(left_running) == 1 else 'are'} left waiting in a daemon thread)")
        failed = any(r.outcome is not None and r.outcome.status == "failed" for r in reports)
        run = CaseOutcome(reports, elapsed, timed_out=timed_out, timeout_s=self.timeout_s,
                          unmatched="" if failed or timed_out else reason, rebuilt_because=rebuild)
        return run
