"""Strict mode's point-to-point calls: a send completes only when a receive matches it, as on NCCL.

A send or receive posts a request to its group; a send and a receive match when the receive's source set
holds the sender, the tags agree and both are the oldest such requests (a receive from any source takes the
send posted first). The send's data is read when they match. A rank that waits for an unmatched request
waits for one peer (a receive from any source waits for none in particular); when a rank is about to wait
and following "waits for" from peer to peer leads back to it, no rank of that cycle can ever go on: the
deadlock is reported at once, naming every rank of the cycle and its call.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch

from pytest_dmlbench.world.rank_names import rank_spans
from pytest_dmlbench.world.simulated.reduction import describe


@dataclass(eq=False)
class Request:
    """One posted send or receive (global ranks)."""

    kind: str  # "send" or "recv"
    rank: int
    peers: tuple[int, ...]  # send: its destination; recv: the sources it takes (all of them: any source)
    tag: int
    tensor: torch.Tensor  # send: the data (read at the match); recv: its buffer
    any_source: bool = False
    matched: bool = False
    source: int = -1  # recv: the sender's global rank, once matched
    data: torch.Tensor | None = None  # recv: the message, once matched

    def text(self) -> str:
        if self.kind == "send":
            return f"send to rank {self.peers[0]} (tag {self.tag}, {describe(self.tensor)})"
        source = "any rank" if self.any_source else f"rank {self.peers[0]}"
        return f"recv from {source} (tag {self.tag}, {describe(self.tensor)})"


class Matcher:
    """The unmatched requests of one group."""

    def __init__(self) -> None:
        self._sends: dict[int, list[Request]] = {}  # by destination
        self._recvs: dict[int, list[Request]] = {}  # by receiving rank

    def post(self, request: Request) -> Request | None:
        """Post ``request``; the request of the other side it matched at once (both then ``matched``), or None."""
        sending = request.kind == "send"
        if sending:
            pending = self._recvs.setdefault(request.peers[0], [])
            peer = next((r for r in pending if r.tag == request.tag and request.rank in r.peers), None)
        else:
            pending = self._sends.setdefault(request.rank, [])
            peer = next((s for s in pending if s.tag == request.tag and s.rank in request.peers), None)
        if peer is None:
            own = self._sends.setdefault(request.peers[0], []) if sending else self._recvs.setdefault(request.rank, [])
            own.append(request)
            return None
        send, recv = (request, peer) if sending else (peer, request)
        pending.remove(peer)
        recv.data = send.tensor.detach().clone()
        recv.source = send.rank
        send.matched = recv.matched = True
        return peer


@dataclass
class Blocked:
    """A rank waiting for an unmatched request: the peer only it can be matched by (None: any)."""

    peer: int | None
    request: Request

    @property
    def text(self) -> str:
        return self.request.text()


def find_cycle(blocked: dict[int, Blocked], rank: int) -> list[int]:
    """The ranks of a cycle of "waits for" through ``rank`` (in order, starting at it), or []."""
    path = [rank]
    seen = {rank}
    current = blocked[rank].peer
    while current is not None:
        if current == rank:
            return path
        if current in seen or current not in blocked or blocked[current].request.matched:
            return []  # that rank can go on (matched, not yet run), or the chain ends elsewhere
        path.append(current)
        seen.add(current)
        current = blocked[current].peer
    return []


def deadlock_report(cycle: Sequence[int], blocked: dict[int, Blocked], world_size: int) -> str:
    """Every rank of the cycle and its call (at more than 16 ranks, ranks whose call is alike are grouped)."""
    if len(cycle) <= 16:
        calls = "; ".join(f"rank {r}: {blocked[r].text}" for r in cycle)
    else:
        by_text: dict[str, list[int]] = {}
        for r in cycle:
            peer = blocked[r].peer
            offset = "" if peer is None else f"{(peer - r) % world_size:+d}"
            text = blocked[r].text.replace(f"rank {peer}", f"rank r{offset} mod {world_size}") if peer is not None \
                else blocked[r].text
            by_text.setdefault(text, []).append(r)
        calls = "; ".join(f"ranks {rank_spans(sorted(ranks))} (r): {text}" for text, ranks in by_text.items())
    shown = [*cycle, cycle[0]] if len(cycle) <= 16 else [*cycle[:8], "...", cycle[-1], cycle[0]]
    return (f"strict mode: deadlock, a cycle of {len(cycle)} ranks each blocked in a point-to-point call that only "
            f"the next can match ({' -> '.join(map(str, shown))}): "
            f"{calls}. On NCCL (and gloo) a send completes only when its receive is posted: these ranks would hang "
            "until the timeout. Order the calls so that one side receives first, or use "
            "isend/irecv (batch_isend_irecv) and wait for both")
