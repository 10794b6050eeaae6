"""A live process-group check: a 2-rank gloo world on the loopback interface, its start time and one
all_reduce whose result every rank verifies.

Ranks are forked when CUDA is not initialised in this process (fast), else spawned (CUDA cannot survive a
fork). Rendezvous is a store file in a fresh folder, so no port is probed and nothing listens beyond the
loopback. Every wait has a timeout; a rank that fails or hangs is reported, never waited on forever.
"""

from __future__ import annotations

import multiprocessing
import os
import queue as queues
import tempfile
import traceback
from dataclasses import asdict, dataclass
from datetime import timedelta
from typing import Any

from pytest_dmlbench.measure.clock import now

DEFAULT_TIMEOUT_S = 60.0


@dataclass(frozen=True)
class LiveCheck:
    """What the check found; ``ok`` only when every rank joined and the all_reduce gave the right sum.

    ``start_s``: from launching the rank processes until every rank reported (process start, joining the
    group, the all_reduce, leaving); ``init_s``: the slowest rank's ``init_process_group``;
    ``all_reduce_s``: the slowest rank's all_reduce (the first collective on a new group)."""

    ok: bool
    backend: str
    world_size: int
    start_method: str
    start_s: float | None
    init_s: float | None
    all_reduce_s: float | None
    detail: str

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _rank(rank: int, world_size: int, store_path: str, timeout_s: float, queue: Any) -> None:
    try:
        os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")
        import torch
        import torch.distributed as td

        begin = now()
        store = td.FileStore(store_path, world_size)  # type: ignore[attr-defined,unused-ignore]
        td.init_process_group("gloo", store=store, rank=rank, world_size=world_size,
                              timeout=timedelta(seconds=timeout_s))
        joined = now() - begin
        value = torch.tensor([float(rank + 1)])
        begin = now()
        td.all_reduce(value)
        reduced = now() - begin
        expected = world_size * (world_size + 1) / 2
        td.destroy_process_group()
        queue.put((rank, float(value), expected, joined, reduced, ""))
    except BaseException:
        queue.put((rank, None, None, None, None, traceback.format_exc()))


def _start_method() -> str:
    import torch

    cuda_ready: bool = torch.cuda.is_initialized()  # type: ignore[no-untyped-call,unused-ignore]
    if "fork" in multiprocessing.get_all_start_methods() and not cuda_ready:
        return "fork"
    return "spawn"


def live_check(world_size: int = 2, timeout_s: float = DEFAULT_TIMEOUT_S) -> LiveCheck:
    """Start a ``world_size``-rank gloo world on loopback, all_reduce rank+1 and verify the sum."""
    method = _start_method()
    context: Any = multiprocessing.get_context(method)
    queue = context.Queue()
    with tempfile.TemporaryDirectory(prefix="dmlbench-envcheck-") as folder:
        store = os.path.join(folder, "store")
        begin = now()
        procs = [context.Process(target=_rank, args=(r, world_size, store, timeout_s, queue), daemon=True)
                 for r in range(world_size)]
        for proc in procs:
            proc.start()
        reports: dict[int, tuple[Any, ...]] = {}
        try:
            while len(reports) < world_size:
                remaining = timeout_s - (now() - begin)
                if remaining <= 0:
                    break
                try:
                    report = queue.get(timeout=remaining)
                except queues.Empty:  # the deadline passed; the missing ranks are named below
                    break
                reports[report[0]] = report
            elapsed = now() - begin
        finally:
            for proc in procs:
                proc.join(timeout=5)
                if proc.is_alive():
                    proc.kill()
                    proc.join(timeout=5)
    missing = [r for r in range(world_size) if r not in reports]
    failures = [f"rank {r}:\n{reports[r][5]}" for r in sorted(reports) if reports[r][5]]
    wrong = [f"rank {r} got {reports[r][1]:g}, expected {reports[r][2]:g}" for r in sorted(reports)
             if not reports[r][5] and reports[r][1] != reports[r][2]]
    if missing or failures or wrong:
        problems = ([f"rank(s) {', '.join(map(str, missing))} did not report within {timeout_s:g} s"]
                    if missing else []) + failures + wrong
        return LiveCheck(False, "gloo", world_size, method, None, None, None, "; ".join(problems))
    joined = max(float(reports[r][3]) for r in reports)
    reduced = max(float(reports[r][4]) for r in reports)
    detail = (f"all_reduce of rank+1 over {world_size} ranks gave {reports[0][1]:g} on every rank "
              f"(expected {reports[0][2]:g})")
    return LiveCheck(True, "gloo", world_size, method, elapsed, joined, reduced, detail)
