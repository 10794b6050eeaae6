"""Hypothesis's example database on a world: rank 0 alone reads and writes it, the others see its reads.

Every rank's engine asks the database the same questions at the same point of the run (the runs are in
lockstep), so rank 0 answers each ``fetch`` from the real database and sends the answer to the others
through the side channel; writes on the other ranks are dropped. All ranks therefore replay the same
stored examples in the same order, and no two processes write one database directory at once.
"""

from __future__ import annotations

import pickle
from collections.abc import Iterable
from typing import Any

from hypothesis.database import ExampleDatabase

from pytest_dmlbench.properties.channel import Channel

FETCH = b"D"


class RankZeroDatabase(ExampleDatabase):
    """Wraps the test's own database: rank 0 uses it, every rank gets rank 0's answers."""

    def __init__(self, inner: ExampleDatabase, channel: Channel, agree: Any) -> None:
        super().__init__()
        self.inner = inner
        self.channel = channel
        self._agree = agree  # checks that every rank is at a database read too (else: out of step)

    def __repr__(self) -> str:
        return f"RankZeroDatabase({self.inner!r})"

    def fetch(self, key: bytes) -> Iterable[bytes]:
        values = list(self.inner.fetch(key)) if self.channel.rank == 0 else []
        answers = self._agree(FETCH + (pickle.dumps(values) if self.channel.rank == 0 else b""), "a database read")
        return values if self.channel.rank == 0 else list(pickle.loads(answers[0][1:]))

    def save(self, key: bytes, value: bytes) -> None:
        if self.channel.rank == 0:
            self.inner.save(key, value)

    def delete(self, key: bytes, value: bytes) -> None:
        if self.channel.rank == 0:
            self.inner.delete(key, value)

    def move(self, src: bytes, dest: bytes, value: bytes) -> None:
        if self.channel.rank == 0:
            self.inner.move(src, dest, value)
