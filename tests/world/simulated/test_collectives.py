"""Exact values of every collective on simulated ranks, with the documented reduction order.

Inputs are chosen so that another reduction order gives other bits: the rank-order fold is the negative
control (a group that summed in another order, or dropped a rank, fails these checks).
"""

from __future__ import annotations

import functools
from typing import Any

import pytest
import torch
import torch.distributed as dist

from tests.world.simulated.helpers import passed, simulate

N = 8


def values(rank: int) -> torch.Tensor:
    """Per-rank values whose float64 sum depends on the order it is taken in."""
    return torch.tensor([1e16 if rank == 0 else 1.0, 0.1 * (rank + 1), -1e16 if rank == N - 1 else 3.0],
                        dtype=torch.float64)


def fold(op: Any, tensors: list[torch.Tensor]) -> torch.Tensor:
    return functools.reduce(op, tensors[1:], tensors[0].clone())


def test_the_inputs_tell_reduction_orders_apart() -> None:
    ordered = fold(torch.add, [values(r) for r in range(N)])
    reverse = fold(torch.add, [values(r) for r in reversed(range(N))])
    assert not torch.equal(ordered, reverse)


@pytest.mark.parametrize(("op", "expected"), [
    (dist.ReduceOp.SUM, lambda ts: fold(torch.add, ts)),
    (dist.ReduceOp.AVG, lambda ts: fold(torch.add, ts) / N),
    (dist.ReduceOp.PRODUCT, lambda ts: fold(torch.mul, ts)),
    (dist.ReduceOp.MAX, lambda ts: fold(torch.maximum, ts)),
    (dist.ReduceOp.MIN, lambda ts: fold(torch.minimum, ts)),
], ids=["sum", "avg", "product", "max", "min"])
def test_all_reduce_folds_in_rank_order(op: Any, expected: Any) -> None:
    want = expected([values(r) for r in range(N)])

    def body(info: Any) -> None:
        tensor = values(dist.get_rank())
        dist.all_reduce(tensor, op=op)
        assert torch.equal(tensor, want), (tensor, want)

    assert passed(simulate(body, N), N)


def test_reduce_reaches_only_the_root() -> None:
    want = fold(torch.add, [values(r) for r in range(N)])

    def body(info: Any) -> None:
        rank = dist.get_rank()
        tensor = values(rank)
        dist.reduce(tensor, dst=3)
        assert torch.equal(tensor, want if rank == 3 else values(rank))

    assert passed(simulate(body, N), N)


def test_data_movement() -> None:
    def body(info: Any) -> None:
        rank, size = dist.get_rank(), dist.get_world_size()
        mine = torch.arange(3, dtype=torch.float64) + 10 * rank
        every = [torch.arange(3, dtype=torch.float64) + 10 * r for r in range(size)]
        gathered = [torch.empty(3, dtype=torch.float64) for _ in range(size)]
        dist.all_gather(gathered, mine)
        assert all(torch.equal(g, e) for g, e in zip(gathered, every, strict=True))
        whole = torch.empty(3 * size, dtype=torch.float64)
        dist.all_gather_into_tensor(whole, mine)
        assert torch.equal(whole, torch.cat(every))
        copy = mine.clone()
        dist.broadcast(copy, src=2)
        assert torch.equal(copy, every[2])
        objects: list[Any] = [None] * size
        dist.all_gather_object(objects, {"rank": rank})
        assert objects == [{"rank": r} for r in range(size)]
        box: list[Any] = [f"from {rank}"]
        dist.broadcast_object_list(box, src=5)
        assert box == ["from 5"]
        at_root = [torch.empty(3, dtype=torch.float64) for _ in range(size)] if rank == 1 else None
        dist.gather(mine, at_root, dst=1)
        if rank == 1:
            assert at_root is not None and all(torch.equal(g, e) for g, e in zip(at_root, every, strict=True))
        out = torch.empty(3, dtype=torch.float64)
        dist.scatter(out, every if rank == 0 else None, src=0)
        assert torch.equal(out, every[rank])
        dist.barrier()

    assert passed(simulate(body, N), N)


def test_reduce_scatter_list_and_tensor_forms() -> None:
    def body(info: Any) -> None:
        rank, size = dist.get_rank(), dist.get_world_size()
        chunks = [torch.full((2,), float(rank * size + c), dtype=torch.float64) for c in range(size)]
        out = torch.empty(2, dtype=torch.float64)
        dist.reduce_scatter(out, chunks)
        want = fold(torch.add, [torch.full((2,), float(r * size + rank), dtype=torch.float64) for r in range(size)])
        assert torch.equal(out, want)
        single = torch.empty(2, dtype=torch.float64)
        dist.reduce_scatter_tensor(single, torch.cat(chunks))
        assert torch.equal(single, want)

    assert passed(simulate(body, N), N)


def test_all_to_all_single() -> None:
    def body(info: Any) -> None:
        rank, size = dist.get_rank(), dist.get_world_size()
        out = torch.empty(size, dtype=torch.int64)
        dist.all_to_all_single(out, torch.arange(size) + 100 * rank)
        assert torch.equal(out, torch.arange(size) * 100 + rank)

    assert passed(simulate(body, N), N)


def test_point_to_point_blocking_and_asynchronous() -> None:
    def body(info: Any) -> None:
        rank, size = dist.get_rank(), dist.get_world_size()
        right, left = (rank + 1) % size, (rank - 1) % size
        incoming = torch.empty(1)
        receive = dist.irecv(incoming, src=left)  # posted before the send: must not wait here
        sent = dist.isend(torch.tensor([float(rank)]), dst=right)
        assert receive is not None and sent is not None  # None only for a rank outside the group
        receive.wait()
        sent.wait()
        assert incoming.item() == left
        if rank == 0:
            for src in range(1, size):
                got = torch.empty(1)
                dist.recv(got, src=src)
                assert got.item() == src * 2
        else:
            dist.send(torch.tensor([rank * 2.0]), dst=0)

    assert passed(simulate(body, N), N)


def test_subgroups() -> None:
    def body(info: Any) -> None:
        rank = dist.get_rank()
        evens = dist.new_group([0, 2, 4, 6])
        odds = dist.new_group([1, 3, 5, 7])
        mine = evens if rank % 2 == 0 else odds
        assert isinstance(mine, dist.ProcessGroup)  # a member's group (a non-member gets NON_GROUP_MEMBER)
        tensor = torch.tensor([float(rank)])
        dist.all_reduce(tensor, group=mine)
        assert tensor.item() == (12.0 if rank % 2 == 0 else 16.0)
        assert dist.get_world_size(mine) == 4 and dist.get_rank(mine) == rank // 2
        if rank % 2:
            assert isinstance(odds, dist.ProcessGroup)
            dist.broadcast(tensor, src=3, group=odds)
            assert tensor.item() == 16.0

    assert passed(simulate(body, N), N)


def test_results_are_the_same_on_every_run() -> None:
    results: list[torch.Tensor] = []

    def body(info: Any) -> None:
        generator = torch.Generator().manual_seed(dist.get_rank())
        tensor = torch.randn(64, generator=generator, dtype=torch.float32) * 10 ** (dist.get_rank() % 9)
        dist.all_reduce(tensor)
        if dist.get_rank() == 0:
            results.append(tensor)

    for _ in range(2):
        assert passed(simulate(body, 64), 64)
    assert torch.equal(results[0], results[1])


def test_batched_point_to_point_and_bitwise_reductions() -> None:
    def body(info: Any) -> None:
        rank, size = dist.get_rank(), dist.get_world_size()
        incoming = torch.empty(1)
        ops = [dist.P2POp(dist.isend, torch.tensor([float(rank)]), (rank + 1) % size),
               dist.P2POp(dist.irecv, incoming, (rank - 1) % size)]
        for work in dist.batch_isend_irecv(ops):
            work.wait()
        assert incoming.item() == (rank - 1) % size
        bits = torch.tensor([0b1111 ^ (1 << (rank % 4))])
        dist.all_reduce(bits, op=dist.ReduceOp.BAND)
        assert bits.item() == 0
        dist.all_reduce(bits.fill_(1 << (rank % 4)), op=dist.ReduceOp.BOR)
        assert bits.item() == 0b1111

    assert passed(simulate(body, N), N)
