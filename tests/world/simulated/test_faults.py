"""The fault contract on simulated ranks: a failing rank is named, a skipped or mismatched collective is
reported at once with every rank's last collective (not at a timeout), a rank blocked outside the process
group is reported, and the next case starts clean."""

from __future__ import annotations

import threading
from typing import Any

import torch
import torch.distributed as dist
from torch.distributed import distributed_c10d as c10d

from pytest_dmlbench.world.failure import failure_text
from tests.world.simulated.helpers import passed, simulate

N = 1024


def report(run: Any, world_size: int = N) -> str:
    return failure_text(run, world_size, "simulated")


def test_a_failing_rank_is_named_and_its_peers_released() -> None:
    def body(info: Any) -> None:
        tensor = torch.ones(4)
        dist.all_reduce(tensor)
        assert info.rank != 517, "rank 517 disagrees"
        dist.all_reduce(tensor)

    run = simulate(body, N)
    text = report(run)
    assert not run.passed and not run.timed_out
    assert text.startswith(f"distributed case failed on rank(s) 517 of {N} (simulated)")
    assert "AssertionError: rank 517 disagrees" in text
    assert "still waiting (most likely in a collective) after rank 517 failed" in text
    assert all(r.outcome is not None or r.stuck for r in run.ranks)
    assert not rank_threads()


def test_a_skipped_collective_is_reported_with_every_ranks_last_collective() -> None:
    def body(info: Any) -> None:
        tensor = torch.ones(4)
        dist.all_reduce(tensor)
        if info.rank != 700:
            dist.all_reduce(tensor)  # rank 700 skips it and ends

    run = simulate(body, N)
    assert not run.passed and not run.timed_out
    assert run.unmatched.startswith("no simulated rank can go on, a collective or receive cannot be matched: "
                                    "ranks 0-699, 701-1023: wait in all_reduce(SUM, float32[4]) #2 on the "
                                    "default group; rank 700: ended (last collective: all_reduce(SUM, "
                                    "float32[4]) #1 on the default group)")
    assert report(run).startswith(f"distributed case on {N} rank(s) (simulated): no simulated rank can go on")
    assert not rank_threads()  # nothing left running


def rank_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name.startswith("dmlbench-simulated-rank-")]


def test_a_mismatched_collective_is_reported_at_once() -> None:
    def body(info: Any) -> None:
        tensor = torch.ones(4)
        if info.rank == 3:
            dist.broadcast(tensor, src=0)
        else:
            dist.all_reduce(tensor)

    run = simulate(body, N)
    assert not run.passed and not run.timed_out
    assert run.unmatched.startswith("rank 3 called broadcast(root 0, float32[4]) as collective #1 of the "
                                    "default group, where rank 0 called all_reduce(SUM, float32[4]). Every "
                                    "rank's last collective: ")
    assert "rank 3: running (last collective: broadcast(root 0, float32[4]) #1" in run.unmatched
    assert not rank_threads()


def test_a_rank_blocked_outside_the_process_group_is_reported() -> None:
    released = threading.Event()

    def body(info: Any) -> None:
        if info.rank == 0:
            released.wait()  # only rank 1 could set it, and rank 1 never gets the turn
        else:
            released.set()

    try:
        run = simulate(body, 2)
    finally:
        released.set()  # lets the thread left waiting end
    assert not run.passed and not run.timed_out
    assert run.unmatched.startswith("rank 0 is blocked outside the process group (in wait of ")
    assert "synchronise through torch.distributed, or run the case with --dmlbench-launcher fork" in run.unmatched


def test_the_next_case_starts_clean() -> None:
    before = c10d._world

    def broken(info: Any) -> None:
        dist.new_group([0, 1])
        if info.rank == 0:
            dist.barrier()

    assert not simulate(broken, 4).passed
    assert c10d._world is before and not dist.is_initialized()

    def clean(info: Any) -> None:
        assert dist.get_world_size() == 4
        assert len(c10d._world.pg_map) == 1  # the default group only: nothing left from the last case
        dist.barrier()

    assert passed(simulate(clean, 4), 4)


def test_a_slow_rank_the_timeout_stopped_is_reported_where_it_was_not_by_what_it_did_after(monkeypatch: Any) -> None:
    """A rank still computing at the timeout runs on once the world is gone, finds no process group and fails for
    that reason alone: the report says where it was when the case was stopped (a 1024-rank case once read
    "failed on rank 822: needs an initialised default process group" for its timeout). The host is held, once the
    world is gone, until that rank has ended, so its late failure is there to be (wrongly) read: without the hold
    which of the two comes first is a race."""
    from pytest_dmlbench.world.simulated import runner
    from pytest_dmlbench.world.simulated.as_torchrun import RANK_THREAD_PREFIX
    from pytest_dmlbench.world.simulated.runner import SimulatedCase

    assert not dist.is_initialized()  # else the rank below would find the process's group and never end
    monkeypatch.setattr(runner, "RELEASE_GRACE_S", 0.2)
    host = threading.current_thread()
    restore_rng = torch.set_rng_state

    def host_waits_for_rank_1(state: torch.Tensor) -> None:  # the host's first act once the world is gone
        if threading.current_thread() is host:
            for thread in threading.enumerate():
                if thread.name == f"{RANK_THREAD_PREFIX}1":
                    thread.join(60)
        restore_rng(state)

    monkeypatch.setattr(torch, "set_rng_state", host_waits_for_rank_1)

    def body(info: Any) -> None:
        if info.rank == 1:
            while dist.is_initialized():  # holds the turn, computing, until the world is taken down
                pass
            raise RuntimeError("ran on after the world ended")
        dist.barrier()

    run = SimulatedCase(1, body, lambda info: {"info": info}, world_size=4, seed=0, timeout_s=1.0).run()
    assert not [t for t in threading.enumerate() if t.name == f"{RANK_THREAD_PREFIX}1"]  # it ran on, and ended
    text = report(run, 4)
    assert run.timed_out and not run.passed and run.ranks[1].stuck
    assert text.startswith("distributed case timed out after 1 s on 4 rank(s) (simulated)"), text
    assert "[rank 1] still running at the 1 s timeout; its stack:" in text
    assert "ran on after the world ended" not in text
    assert "while dist.is_initialized():" in text  # rank 1's stack at the timeout


def test_many_ranks_are_listed_as_spans() -> None:
    from pytest_dmlbench.world.rank_names import rank_list

    assert rank_list([0, 1, 2, 3]) == "0, 1, 2, 3"  # a few: one by one, as forked worlds list them
    assert rank_list([*range(12), *range(13, 1024)]) == "0-11, 13-1023"


def test_a_rank_blocked_where_it_cannot_be_seen_is_stopped_at_the_case_timeout() -> None:
    from pytest_dmlbench.world.simulated.runner import SimulatedCase

    held = threading.Lock()
    held.acquire()

    def body(info: Any) -> None:
        if info.rank == 1:
            held.acquire()  # a plain lock: no Python frame of threading.py shows the wait
        dist.barrier()

    try:
        run = SimulatedCase(1, body, lambda info: {"info": info}, world_size=4, seed=0, timeout_s=1.0).run()
    finally:
        held.release()  # lets the thread left waiting end
    text = report(run, 4)
    assert run.timed_out and not run.passed
    assert text.startswith("distributed case timed out after 1 s on 4 rank(s) (simulated); rank(s) 0, 1, 2, 3 "
                           "still running.")
    assert "the case did not finish within its 1 s timeout; rank 1 was running. Every rank's last collective: " \
           "rank 0: wait in barrier #1 on the default group; rank 1: running (no collective issued); " \
           "ranks 2-3: not started (no collective issued)" in text
