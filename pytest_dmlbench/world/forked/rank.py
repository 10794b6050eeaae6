"""The rank process: joins the process group, then runs the cases the parent sends until told to stop.

Runs only in forked rank processes. It imports no pytest code of its own; pytest's outcome exceptions
(skip, xfail, fail) raised by a case body are recognised by name.
"""

from __future__ import annotations

import faulthandler
import io
import os
import pickle
import signal
import sys
import time
import traceback
from datetime import timedelta
from multiprocessing.connection import Connection
from typing import Any, NoReturn

from pytest_dmlbench.measure.dist_info import DistInfo
from pytest_dmlbench.measure.memory import note_rank_start
from pytest_dmlbench.world.backend import device_for
from pytest_dmlbench.world.execute import case_arguments, execute_case
from pytest_dmlbench.world.forked.lifetime import detach_from_terminal_signals, die_with_parent
from pytest_dmlbench.world.forked.master_store import HOST, serve_master_store
from pytest_dmlbench.world.forked.pinning import pin_this_rank, usable_cores
from pytest_dmlbench.world.groups import install_p2p_accounting
from pytest_dmlbench.world.guard import StateSnapshot, snapshot
from pytest_dmlbench.world.messages import CaseRequest, RankOutcome, Ready, Shutdown, WorldSpec
from pytest_dmlbench.world.registry import CaseRegistry
from pytest_dmlbench.world.torchrun_env import RankPlace, run_id, torchrun_variables

# Objects replaced at start-up are kept alive so that their finalisers never close a reused descriptor.
_KEEP_ALIVE: list[Any] = []


def rank_log_path(out_dir: str, rank: int) -> str:
    return os.path.join(out_dir, f"rank{rank}.log")


def rank_stack_path(out_dir: str, rank: int) -> str:
    return os.path.join(out_dir, f"rank{rank}.stack")


def _redirect_output(out_dir: str, rank: int) -> None:
    """Send fds 1 and 2 (and sys.stdout/stderr) to this rank's log file; stack dumps to its stack file."""
    log_fd = os.open(rank_log_path(out_dir, rank), os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.dup2(log_fd, 1)
    os.dup2(log_fd, 2)
    os.close(log_fd)
    os.close(devnull)
    _KEEP_ALIVE.extend([sys.stdin, sys.stdout, sys.stderr])
    sys.stdin = open(os.devnull)  # noqa: SIM115 - lives as long as the process
    sys.stdout = io.TextIOWrapper(os.fdopen(1, "wb", buffering=0, closefd=False), write_through=True)
    sys.stderr = io.TextIOWrapper(os.fdopen(2, "wb", buffering=0, closefd=False), write_through=True)
    stack_file = open(rank_stack_path(out_dir, rank), "w")  # noqa: SIM115 - lives as long as the process
    _KEEP_ALIVE.append(stack_file)
    faulthandler.enable(file=sys.stderr, all_threads=True)
    faulthandler.register(signal.SIGUSR1, file=stack_file, all_threads=True, chain=False)


class RankProcess:
    """State of one rank: its identity, its connection to the parent and the cases it can run."""

    def __init__(self, spec: WorldSpec, rank: int, conn: Connection, registry: CaseRegistry) -> None:
        self.spec = spec
        self.rank = rank
        self.conn = conn
        self.registry = registry
        self.dist = DistInfo(rank, spec.world_size, spec.backend, device_for(spec.backend, rank))
        self.clean_state: StateSnapshot | None = None  # taken once the rank has joined its group
        self.master_store: Any = None  # rank 0: the TCP store at MASTER_ADDR:MASTER_PORT

    def join_group(self) -> float:
        import torch
        import torch.distributed as td

        start = time.perf_counter()
        if self.spec.pin_cores:
            pin_this_rank(self.rank, usable_cores())
        torch.set_num_threads(self.spec.threads)
        if self.spec.backend == "nccl":
            torch.cuda.set_device(self.rank)
        store = td.FileStore(self.spec.store_path, self.spec.world_size)  # type: ignore[attr-defined,unused-ignore]
        td.init_process_group(
            self.spec.backend,
            store=store,
            rank=self.rank,
            world_size=self.spec.world_size,
            timeout=timedelta(seconds=self.spec.group_timeout_s),
        )
        self.master_store, port = serve_master_store(store, self.rank, self.spec.world_size,
                                                     timedelta(seconds=self.spec.init_timeout_s))
        os.environ.update(torchrun_variables(RankPlace.single_node(self.rank, self.spec.world_size), HOST, port,
                                             run_id(self.spec.world_id)))
        return time.perf_counter() - start

    def serve(self) -> NoReturn:
        init_s = self.join_group()
        install_p2p_accounting()
        self.clean_state = snapshot()
        note_rank_start()  # the resident size case peaks are rebased on (measure/memory.py)
        self.conn.send(Ready(self.rank, os.getpid(), init_s))
        while True:
            try:
                message = self.conn.recv()
            except (EOFError, OSError):
                _leave(0)
            if isinstance(message, Shutdown):
                self._shutdown()
            if isinstance(message, CaseRequest):
                self._send(self.run_case(message))

    def _send(self, outcome: RankOutcome) -> None:
        try:
            self.conn.send(outcome)
        except (pickle.PicklingError, TypeError, AttributeError) as exc:
            self.conn.send(
                RankOutcome(
                    outcome.case_id,
                    self.rank,
                    "failed",
                    message=f"the case's recorded results cannot be sent to the parent process: {exc}",
                    traceback=traceback.format_exc(),
                )
            )

    def _shutdown(self) -> NoReturn:
        import torch.distributed as td

        if td.is_initialized():
            td.destroy_process_group()
        _leave(0)

    def _arguments(self, message: CaseRequest, bench: Any) -> dict[str, Any]:
        return case_arguments(self.registry[message.nodeid], message, self.dist, bench)

    def run_case(self, message: CaseRequest) -> RankOutcome:
        entry = self.registry.get(message.nodeid)

        def arguments(bench: Any) -> dict[str, Any]:
            if entry is None:
                raise LookupError(
                    f"case {message.nodeid!r} was not collected when the ranks started; "
                    "cases must be collected before the first distributed case runs"
                )
            return self._arguments(message, bench)

        return execute_case(message.case_id, self.dist, entry.func if entry else _missing, arguments,
                            seed=message.seed, measure_memory=message.measure_memory,
                            clean_state=self.clean_state, block=message.block,
                            warning_filters=message.warning_filters)


def _missing() -> None:
    raise AssertionError("unreachable: the arguments step reports a missing case")


def _leave(code: int) -> NoReturn:
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    os._exit(code)


def rank_main(spec: WorldSpec, rank: int, conn_fd: int, registry: CaseRegistry, zygote_pid: int) -> NoReturn:
    """Entry point of a freshly forked rank. Never returns."""
    try:
        die_with_parent(zygote_pid)
        detach_from_terminal_signals()
        _redirect_output(spec.out_dir, rank)
        os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")
        os.environ["RANK"] = str(rank)
        os.environ["WORLD_SIZE"] = str(spec.world_size)
        os.environ["LOCAL_RANK"] = str(rank)
        RankProcess(spec, rank, Connection(conn_fd), registry).serve()
    except BaseException:
        traceback.print_exc()
        _leave(1)
