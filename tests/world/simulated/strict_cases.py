"""Bugs NCCL hangs or corrupts data on and gloo passes, each beside the same code made correct: run in strict
mode by ``test_strict_mode.py`` (at 2 and 1024 ranks) and, side by side with forked gloo ranks, in one inner
pytest run. Each body takes the rank and the world size; ranks past what a case uses only join the barrier.

Imports only torch: the file is copied into the inner pytest runs.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
import torch.distributed as td


def race_after_isend(rank: int, world_size: int, *, correct: bool = False) -> None:
    """Even ranks send a tensor to the next rank and change it before ``wait()`` (the race); correct: after."""
    tensor = torch.full((4,), float(rank))
    if rank % 2 == 0 and rank + 1 < world_size:
        work = td.isend(tensor, rank + 1)
        assert work is not None  # None only for a rank outside the group
        if correct:
            work.wait()
        tensor.add_(100.0)  # the next micro-step reuses the buffer
        work.wait()
    elif rank % 2 == 1:
        td.recv(tensor, rank - 1)
        if correct:
            assert torch.equal(tensor, torch.full((4,), float(rank - 1))), tensor
    td.barrier()


def send_send(rank: int, world_size: int, *, correct: bool = False) -> None:
    """A ring exchange: every rank sends to the next, then receives from the previous (both blocking); correct:
    even ranks send first, odd ranks receive first."""
    tensor = torch.full((4,), float(rank))
    got = torch.empty(4)
    after, before = (rank + 1) % world_size, (rank - 1) % world_size
    if correct and rank % 2 == 1:
        td.recv(got, before)
        td.send(tensor, after)
    else:
        td.send(tensor, after)
        td.recv(got, before)
    assert torch.equal(got, torch.full((4,), float(before))), got
    td.barrier()


def pipeline_order(rank: int, world_size: int, *, correct: bool = False) -> None:
    """A pipeline of ``world_size`` stages, two micro-batches tagged with their index; each stage adds 1. The
    last stage takes the micro-batches in the wrong order (1 before 0, blocking); correct: 0 then 1."""
    order = (0, 1) if correct or rank != world_size - 1 else (1, 0)
    for micro_batch in order:
        activation = torch.full((4,), float(micro_batch)) if rank == 0 else torch.empty(4)
        if rank > 0:
            td.recv(activation, rank - 1, tag=micro_batch)
        activation = activation + 1
        if rank < world_size - 1:
            td.send(activation, rank + 1, tag=micro_batch)
        else:
            assert torch.equal(activation, torch.full((4,), float(micro_batch + world_size))), activation
    td.barrier()


BUGS: dict[str, Callable[..., None]] = {
    "race after isend": race_after_isend,
    "send/send deadlock": send_send,
    "pipeline micro-batch order": pipeline_order,
}
