"""The engine's own side channel between the ranks of a world: an all-gather of small byte strings.

Property runs agree on every example through this channel, never through the user's process group, so a
case's collective sequence numbers stay untouched. Two forms:

- :class:`LocalSocketChannel` for the plugin's forked worlds (all ranks on one host, a ``FileStore``
  rendezvous): rank 0 listens on a Unix-domain socket (nothing listens on a network interface), publishes
  its path once through the world's store, and every exchange is one message to rank 0 and one reply.
  FileStore ``wait`` polls every 10 ms, far too slow per example; the sockets block without polling.
- :class:`StoreChannel` under an external launcher (``torchrun``, multi-node): the launcher's TCPStore
  (``set``, event-driven ``wait``, ``multi_get`` on per-exchange keys).

Rank-side code: imports neither pytest nor, at module level, torch.
"""

from __future__ import annotations

import os
import shutil
import socket
import struct
import tempfile
from datetime import timedelta
from typing import Any, Protocol

ADDRESS_KEY = "dmlbench/lockstep/address"
KEY_PREFIX = "dmlbench/lockstep/x"
# A peer that has not reported after this long is treated as gone. The parent's per-case timeout (which
# dumps every rank's stack) normally ends a stuck case long before; this only bounds every wait.
WAIT_TIMEOUT_S = 3600.0
_HEADER = struct.Struct("!QI")  # exchange number, payload length
_COUNT = struct.Struct("!I")
_LENGTH = struct.Struct("!I")


class ChannelBroken(BaseException):
    """A peer vanished or answered out of step; derived from BaseException so Hypothesis does not shrink it."""


class Channel(Protocol):
    rank: int
    world_size: int

    def exchange(self, payload: bytes) -> list[bytes]:
        """Every rank's payload of this exchange, in rank order (every rank must call it)."""


class SoloChannel:
    """A world of one rank: nothing to agree with."""

    def __init__(self) -> None:
        self.rank = 0
        self.world_size = 1

    def exchange(self, payload: bytes) -> list[bytes]:
        return [payload]


def _recv_exact(sock: socket.socket, size: int, who: str) -> bytes:
    chunks = []
    while size:
        try:
            chunk = sock.recv(size)
        except TimeoutError:
            raise ChannelBroken(f"{who} sent nothing for {WAIT_TIMEOUT_S:g} s") from None
        except OSError as exc:
            raise ChannelBroken(f"the side channel to {who} failed: {exc}") from None
        if not chunk:
            raise ChannelBroken(f"{who} closed the side channel (its process ended)")
        chunks.append(chunk)
        size -= len(chunk)
    return b"".join(chunks)


def _send(sock: socket.socket, data: bytes, who: str) -> None:
    try:
        sock.sendall(data)
    except OSError as exc:
        raise ChannelBroken(f"cannot reach {who} on the side channel: {exc}") from None


def _pack_list(items: list[bytes]) -> bytes:
    return _COUNT.pack(len(items)) + b"".join(_LENGTH.pack(len(item)) + item for item in items)


def _unpack_list(data: bytes) -> list[bytes]:
    (count,), offset, items = _COUNT.unpack_from(data), _COUNT.size, []
    for _ in range(count):
        (size,) = _LENGTH.unpack_from(data, offset)
        offset += _LENGTH.size
        items.append(data[offset:offset + size])
        offset += size
    return items


class LocalSocketChannel:
    """A star of Unix-domain sockets around rank 0 (all ranks on one host)."""

    def __init__(self, rank: int, world_size: int, peers: dict[int, socket.socket]) -> None:
        self.rank = rank
        self.world_size = world_size
        self._peers = peers  # on rank 0: every other rank; elsewhere: {0: the socket to rank 0}
        self._count = 0

    @classmethod
    def connect(cls, store: Any, rank: int, world_size: int) -> LocalSocketChannel:
        """Rank 0 listens and publishes the socket path in ``store``; the others connect and say who they are."""
        if rank == 0:
            folder = tempfile.mkdtemp(prefix="dmlbench-lockstep-")
            path = os.path.join(folder, "s")
            listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            try:
                listener.bind(path)
                listener.listen(world_size)
                listener.settimeout(WAIT_TIMEOUT_S)
                store.set(ADDRESS_KEY, path)
                peers: dict[int, socket.socket] = {}
                while len(peers) < world_size - 1:
                    try:
                        sock, _ = listener.accept()
                    except TimeoutError:
                        raise ChannelBroken(f"only {len(peers)} of {world_size - 1} ranks joined the side channel "
                                            f"within {WAIT_TIMEOUT_S:g} s") from None
                    sock.settimeout(WAIT_TIMEOUT_S)
                    (peer,) = _COUNT.unpack(_recv_exact(sock, _COUNT.size, "a joining rank"))
                    peers[peer] = sock
            finally:
                listener.close()
                shutil.rmtree(folder, ignore_errors=True)  # the connections stay; nothing left on disk
            return cls(rank, world_size, peers)
        path = store.get(ADDRESS_KEY).decode()
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.settimeout(WAIT_TIMEOUT_S)
        try:
            sock.connect(path)
        except OSError as exc:
            raise ChannelBroken(f"cannot join rank 0's side channel at {path}: {exc}") from None
        _send(sock, _COUNT.pack(rank), "rank 0")
        return cls(rank, world_size, {0: sock})

    def exchange(self, payload: bytes) -> list[bytes]:
        try:
            return self._exchange(payload)
        except ChannelBroken:
            self._close()  # the channel is unusable: let every rank waiting on this one know at once
            raise

    def _close(self) -> None:
        for sock in self._peers.values():
            sock.close()

    def _exchange(self, payload: bytes) -> list[bytes]:
        self._count += 1
        if self.rank != 0:
            _send(self._peers[0], _HEADER.pack(self._count, len(payload)) + payload, "rank 0")
            header = _recv_exact(self._peers[0], _HEADER.size, "rank 0")
            number, size = _HEADER.unpack(header)
            reply = _recv_exact(self._peers[0], size, "rank 0")
            if number != self._count:
                raise ChannelBroken(f"rank 0 answered exchange {number} while this rank is at {self._count}")
            return _unpack_list(reply)
        items = [payload]
        for peer in range(1, self.world_size):
            sock = self._peers[peer]
            number, size = _HEADER.unpack(_recv_exact(sock, _HEADER.size, f"rank {peer}"))
            if number != self._count:
                raise ChannelBroken(f"rank {peer} is at exchange {number} while rank 0 is at {self._count}")
            items.append(_recv_exact(sock, size, f"rank {peer}"))
        reply = _pack_list(items)
        message = _HEADER.pack(self._count, len(reply)) + reply
        for peer in range(1, self.world_size):
            _send(self._peers[peer], message, f"rank {peer}")
        return items


class StoreChannel:
    """Exchanges through a c10d store (the launcher's TCPStore): one key per rank and exchange."""

    def __init__(self, store: Any, rank: int, world_size: int, timeout_s: float = WAIT_TIMEOUT_S) -> None:
        self.rank = rank
        self.world_size = world_size
        self._store = store
        self._timeout = timedelta(seconds=timeout_s)
        self._count = 0

    def _key(self, number: int, rank: int) -> str:
        return f"{KEY_PREFIX}/{number}/{rank}"

    def exchange(self, payload: bytes) -> list[bytes]:
        self._count += 1
        keys = [self._key(self._count, rank) for rank in range(self.world_size)]
        self._store.set(keys[self.rank], payload)
        try:
            self._store.wait(keys, self._timeout)
        except RuntimeError as exc:
            raise ChannelBroken(f"not every rank reported exchange {self._count}: {exc}") from None
        values = [bytes(v) for v in self._store.multi_get(keys)]
        if self._count > 1:  # everyone has written this exchange, so everyone has read the previous one
            self._store.delete_key(self._key(self._count - 1, self.rank))
        return values


_CURRENT: tuple[Any, Channel] | None = None


def _base_store(store: Any) -> Any:
    import torch.distributed as td

    while isinstance(store, td.PrefixStore):  # type: ignore[attr-defined,unused-ignore]
        store = store.underlying_store
    return store


def current_channel() -> Channel:
    """The side channel of this process's default group (made on first use, then kept for the world)."""
    global _CURRENT
    import torch.distributed as td

    if not td.is_initialized() or td.get_world_size() == 1:
        return SoloChannel()
    from torch.distributed import distributed_c10d

    store = distributed_c10d._get_default_store()
    if _CURRENT is not None and _CURRENT[0] is store:
        return _CURRENT[1]
    rank, world_size = td.get_rank(), td.get_world_size()
    channel: Channel
    if isinstance(_base_store(store), td.FileStore):  # type: ignore[attr-defined,unused-ignore]
        channel = LocalSocketChannel.connect(store, rank, world_size)
    else:
        channel = StoreChannel(store, rank, world_size)
    _CURRENT = (store, channel)
    return channel
