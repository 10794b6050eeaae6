"""Turn-taking: the ranks of a simulated world run one at a time and switch only where one must wait.

A rank holds the turn until it waits (for a collective to fill, for a message) or ends; the turn then goes
to the next runnable rank, first come first served, which makes every run of a case take the same path.
When a rank must wait and no rank can run, nothing can ever progress: the ``on_stall`` callback explains
why (each rank's last collective) and every waiting rank is released with that explanation.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable

# How often a rank waiting for its turn looks for an abort it was not woken for (a safety net: aborts wake):
# every _POLL_S, and less often in a large world, so that all its waiting ranks together wake at most
# _WORLD_POLLS_PER_S times a second. Each wake-up takes the GIL from the rank that runs: at 1024 ranks polling
# every 5 s (200 wake-ups a second) the running rank got almost none of it, and a strict DDP world took
# 431 s of CPU to build where 512 ranks took 11 s.
_POLL_S = 5.0
_WORLD_POLLS_PER_S = 4.0


class WorldAborted(BaseException):
    """Raised in a rank that waits when the simulated world cannot go on; the message says why.

    A ``BaseException``, like ``KeyboardInterrupt``: a script's ``except Exception`` around a collective
    cannot swallow it and carry on as if the collective had worked."""


class TurnTaking:
    """Who runs now, who may run next, and who waits, for ``world_size`` rank threads."""

    def __init__(self, world_size: int, on_switch: Callable[[int, int], None],
                 on_stall: Callable[[], str]) -> None:
        self.world_size = world_size
        self.current: int | None = None
        self.abort_reason = ""
        self._on_switch = on_switch  # (leaving rank, entering rank): swap per-rank process state
        self._on_stall = on_stall
        self._runnable: deque[int] = deque()
        self._waiting: set[int] = set()
        self._ended: set[int] = set()
        self._mutex = threading.Lock()  # the bookkeeping; uncontended except after an abort
        self._wake = [threading.Lock() for _ in range(world_size)]
        for lock in self._wake:
            lock.acquire()
        self.all_ended = threading.Event()
        self.poll_s = max(_POLL_S, world_size / _WORLD_POLLS_PER_S)  # a waiting rank's look for an abort

    # -- called by the rank that holds the turn ------------------------------------------------------------
    def ready(self, rank: int) -> None:
        """``rank`` (waiting) may run again when its turn comes."""
        if rank in self._waiting:
            self._waiting.discard(rank)
            self._runnable.append(rank)

    def wait(self, rank: int) -> None:
        """Give up the turn until :meth:`ready` is called for ``rank``; raises WorldAborted when no rank can
        run (the stall is explained to every waiting rank) or the world was aborted."""
        self._check_abort()
        with self._mutex:
            self._waiting.add(rank)
            self._pass_turn(rank)
        self._await_turn(rank)

    def end(self, rank: int) -> None:
        """``rank``'s body is done (passed or failed); the turn goes on."""
        with self._mutex:
            self._ended.add(rank)
            self._waiting.discard(rank)
            if len(self._ended) == self.world_size:
                self.current = None
                self.all_ended.set()
                return
            self._pass_turn(rank)

    # -- rank threads and the host -------------------------------------------------------------------------
    def begin(self, first: int = 0) -> None:
        """Queue every rank in order and give the turn to the first (called once, by the host)."""
        self._runnable.extend(r for r in range(self.world_size) if r != first)
        self.current = first
        self._wake[first].release()

    def await_first_turn(self, rank: int) -> None:
        """A rank thread's first act: wait until it may run."""
        self._await_turn(rank)

    def abort(self, reason: str) -> None:
        """Release every waiting rank with ``reason`` (called by the host on a timeout or a block)."""
        with self._mutex:
            self.abort_reason = self.abort_reason or reason
            for lock in self._wake:
                if lock.locked():
                    lock.release()

    # -- internals ------------------------------------------------------------------------------------------
    def _pass_turn(self, leaving: int) -> None:
        if self.abort_reason:
            self._release_all()
            return
        if not self._runnable:
            if self._waiting:
                self.abort_reason = self._on_stall()
                self._release_all()
            return
        entering = self._runnable.popleft()
        self._on_switch(leaving, entering)
        self.current = entering
        self._wake[entering].release()

    def _release_all(self) -> None:
        self.current = None
        for rank in self._waiting:
            lock = self._wake[rank]
            if lock.locked():
                lock.release()

    def _await_turn(self, rank: int) -> None:
        while not self._wake[rank].acquire(timeout=self.poll_s):
            if self.abort_reason:
                break
        self._check_abort()

    def _check_abort(self) -> None:
        if self.abort_reason:
            raise WorldAborted(self.abort_reason)
