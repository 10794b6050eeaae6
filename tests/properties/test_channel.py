"""The side channel's exchanges, on real stores and real Unix-domain sockets (ranks played by threads)."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import pytest
import torch.distributed as td

from pytest_dmlbench.properties.channel import ChannelBroken, LocalSocketChannel, StoreChannel


def _run_ranks(world_size: int, body: Callable[[int], Any]) -> list[Any]:
    results: list[Any] = [None] * world_size

    def target(rank: int) -> None:
        try:
            results[rank] = body(rank)
        except BaseException as exc:  # handed back to the test, which asserts on it
            results[rank] = exc

    threads = [threading.Thread(target=target, args=(rank,)) for rank in range(world_size)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert not any(thread.is_alive() for thread in threads), "an exchange hung"
    return results


@pytest.mark.parametrize("kind", ["sockets", "store"])
def test_every_rank_gets_every_payload_in_rank_order(kind: str) -> None:
    store = td.HashStore()  # type: ignore[attr-defined,unused-ignore]  # not re-exported in torch's stubs

    def body(rank: int) -> list[list[bytes]]:
        channel = (LocalSocketChannel.connect(store, rank, 3) if kind == "sockets" else StoreChannel(store, rank, 3))
        return [channel.exchange(f"{step}:{rank}".encode()) for step in range(50)]

    results = _run_ranks(3, body)
    for rank_result in results:
        assert rank_result == [[f"{step}:{r}".encode() for r in range(3)] for step in range(50)]


def test_store_keys_of_finished_exchanges_are_removed() -> None:
    store = td.HashStore()  # type: ignore[attr-defined,unused-ignore]  # not re-exported in torch's stubs
    _run_ranks(2, lambda rank: [StoreChannel(store, rank, 2).exchange(b"x") for _ in range(1)])
    channels = [StoreChannel(store, rank, 2) for rank in range(2)]
    _run_ranks(2, lambda rank: [channels[rank].exchange(b"y") for _ in range(10)])
    assert store.num_keys() <= 2 + 2  # the last exchange's keys (plus the first run's) remain


def test_a_vanished_peer_is_reported_not_waited_for() -> None:
    store = td.HashStore()  # type: ignore[attr-defined,unused-ignore]  # not re-exported in torch's stubs
    channels: dict[int, LocalSocketChannel] = {}

    def body(rank: int) -> Any:
        channels[rank] = LocalSocketChannel.connect(store, rank, 2)
        return None

    _run_ranks(2, body)
    channels[1]._peers[0].close()  # rank 1's process ended
    with pytest.raises(ChannelBroken, match="rank 1 closed the side channel"):
        channels[0].exchange(b"P")


def test_ranks_out_of_step_are_detected() -> None:
    store = td.HashStore()  # type: ignore[attr-defined,unused-ignore]  # not re-exported in torch's stubs

    def body(rank: int) -> Any:
        channel = LocalSocketChannel.connect(store, rank, 2)
        if rank == 1:
            channel._count += 1  # rank 1 believes it is one exchange further
        return channel.exchange(b"P")

    results = _run_ranks(2, body)
    assert isinstance(results[0], ChannelBroken) and "rank 1 is at exchange 2 while rank 0 is at 1" in str(results[0])
    assert isinstance(results[1], ChannelBroken)
