"""One rank of a Ray world: a Ray actor that joins the process group and runs cases like a forked rank.

Runs inside Ray worker processes; imports no pytest. The actor is threaded (two concurrent calls) so that
the parent can ask for every thread's stack while a case hangs in the other thread.
"""

from __future__ import annotations

import io
import os
import sys
import tempfile
import time
import traceback
from datetime import timedelta
from typing import Any

from pytest_dmlbench.measure.dist_info import DistInfo
from pytest_dmlbench.world.backend import device_for
from pytest_dmlbench.world.bound_store import bound_store
from pytest_dmlbench.world.execute import case_arguments, execute_case
from pytest_dmlbench.world.messages import CaseRequest, RankOutcome, Ready, WorldSpec
from pytest_dmlbench.world.registry import CaseRegistry
from pytest_dmlbench.world.thread_frames import current_frames
from pytest_dmlbench.world.torchrun_env import RankPlace, run_id, torchrun_variables


class RankActor:
    """Rank ``rank`` of ``spec``; ``registry`` holds the cases it can run (shipped by Ray's pickling)."""

    def __init__(self, spec: WorldSpec, rank: int, registry: CaseRegistry) -> None:
        self.spec = spec
        self.rank = rank
        self.registry = registry
        self.store: Any = None
        self.dist = DistInfo(rank, spec.world_size, spec.backend, device_for(spec.backend, rank))
        # the log has no name once open, so no file outlives the actor, however it ends (Ray kills actors)
        handle, path = tempfile.mkstemp(prefix=f"dmlbench-ray-rank{rank}-", suffix=".log")
        self._log_reader = os.open(path, os.O_RDONLY)
        os.unlink(path)
        os.dup2(handle, 1)
        os.dup2(handle, 2)
        os.close(handle)
        sys.stdout = io.TextIOWrapper(os.fdopen(1, "wb", buffering=0, closefd=False), write_through=True)
        sys.stderr = io.TextIOWrapper(os.fdopen(2, "wb", buffering=0, closefd=False), write_through=True)
        self._log_offset = 0
        os.environ["RANK"] = str(rank)
        os.environ["WORLD_SIZE"] = str(spec.world_size)
        os.environ["LOCAL_RANK"] = str(rank)

    def where(self) -> tuple[str, str, int]:
        """This actor's node id, node address and pid."""
        import ray

        return ray.get_runtime_context().get_node_id(), ray.util.get_node_ip_address(), os.getpid()  # type: ignore[no-untyped-call,unused-ignore]

    def host_store(self, host: str) -> int:
        """Rank 0: start the world's TCP store listening on ``host`` only, port chosen by the OS; returns the
        port. (A TCPStore that opens its own socket binds every interface, whatever ``host`` says.)"""
        self.store = bound_store(host, 0, self.spec.world_size, timedelta(seconds=self.spec.init_timeout_s),
                                 wait_for_workers=False)
        return int(self.store.port)

    def join(self, host: str, port: int, loopback: bool, nodes: tuple[str, ...] = ()) -> Ready:
        """Join the process group through the TCP store at ``host:port``; set torchrun's variables (``nodes``:
        each rank's node, for the local ranks; none: one node)."""
        import torch
        import torch.distributed as td

        start = time.perf_counter()
        if loopback:
            os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")
        torch.set_num_threads(self.spec.threads)
        if self.store is None:
            self.store = td.TCPStore(host, port, self.spec.world_size, is_master=False,  # type: ignore[attr-defined,unused-ignore]
                                     timeout=timedelta(seconds=self.spec.init_timeout_s))
        td.init_process_group(self.spec.backend, store=self.store, rank=self.rank, world_size=self.spec.world_size,
                              timeout=timedelta(seconds=self.spec.group_timeout_s))
        place = (RankPlace.from_nodes(self.rank, nodes) if nodes
                 else RankPlace.single_node(self.rank, self.spec.world_size))
        os.environ.update(torchrun_variables(place, host, port, run_id(self.spec.world_id)))
        return Ready(self.rank, os.getpid(), time.perf_counter() - start)

    def run_case(self, message: CaseRequest) -> tuple[RankOutcome, str]:
        """Run one case; returns its outcome and what the rank printed meanwhile."""

        entry = self.registry.get(message.nodeid)

        def arguments(bench: Any) -> dict[str, Any]:
            if entry is None:
                raise LookupError(f"case {message.nodeid!r} was not shipped to this Ray world")
            return case_arguments(entry, message, self.dist, bench)

        outcome = execute_case(message.case_id, self.dist, entry.func if entry else _missing, arguments,
                               seed=message.seed, measure_memory=message.measure_memory, block=message.block)
        return outcome, self.output()

    def output(self) -> str:
        """What this rank printed since the last call."""
        chunks = []
        while chunk := os.pread(self._log_reader, 1 << 20, self._log_offset):
            chunks.append(chunk)
            self._log_offset += len(chunk)
        data = b"".join(chunks)
        return data.decode("utf-8", errors="replace")

    def stacks(self) -> str:
        """Every thread's stack (the case's thread included), formatted like a traceback."""
        parts = []
        for thread_id, frame in current_frames().items():
            parts.append(f"Thread {thread_id:#x}:\n" + "".join(traceback.format_stack(frame)))
        return "\n".join(parts)

    def shutdown(self) -> None:
        import torch.distributed as td

        if td.is_initialized():
            td.destroy_process_group()


def _missing() -> None:
    raise AssertionError("unreachable: the arguments step reports a missing case")
