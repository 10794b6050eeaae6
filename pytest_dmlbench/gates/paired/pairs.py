"""Block pairs as the trial reads them, and where they come from.

A :class:`BlockPair` is one pair of blocks, A's (the working tree) and B's (REF), as measured: per figure
each block's samples, which side ran first, the canary read beside each block and whether both ran on newly
started worlds. A :class:`PairSource` hands the trial one pair at a time and keeps the clock the pair budget
is spent on: the live source (:mod:`.live_source`) runs blocks on the two block servers, a
:class:`ListSource` serves pairs given to it (recorded nights, :mod:`.recorded`; tests).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Protocol

from pytest_dmlbench.gates.paired.statistics import Scale, block_median
from pytest_dmlbench.results.stats import median

Readings = Mapping[str, tuple[float, ...]]
"""One block's samples per figure (a recorded pair holds one sample a figure: the block's median)."""


@dataclass(frozen=True)
class BlockPair:
    """One pair of blocks: A's and B's readings, the order they ran in, the canary beside each and whether
    both blocks ran on fresh worlds (``measure/canary.py``; NaN where no canary was read)."""

    a: Readings
    b: Readings
    a_first: bool = True
    canary_a: float = math.nan
    canary_b: float = math.nan
    fresh_world: bool = False

    def block_medians(self, name: str, scale: Scale) -> tuple[float, float]:
        """A's and B's block reading of ``name`` (NaN where a block did not record it)."""
        return block_median(self.a.get(name, ()), scale), block_median(self.b.get(name, ()), scale)

    def medians(self, name: str) -> tuple[float | None, float | None]:
        """A's and B's plain median of ``name``'s samples, a single-reading figure's (None where absent)."""
        a, b = self.a.get(name, ()), self.b.get(name, ())
        return (median(a) if a else None), (median(b) if b else None)


class PairSource(Protocol):
    """Where a trial's block pairs come from, and the clock its pair budget is spent on."""

    def pair(self, fresh_world: bool, confirming: bool) -> BlockPair:
        """The next pair (``fresh_world``: both blocks on newly started worlds; ``confirming``: a pair of the
        second, confirming stage)."""

    def now(self) -> float:
        """Seconds on this source's clock."""


class ListSource:
    """Pairs served in the order given; each pair costs ``seconds_per_pair`` on the source's clock, which
    starts at ``start`` (a replayed night carries it from case to case)."""

    def __init__(self, pairs: Iterable[BlockPair], seconds_per_pair: float = 0.0, start: float = 0.0) -> None:
        self._pairs: Iterator[BlockPair] = iter(pairs)
        self.seconds_per_pair = seconds_per_pair
        self.clock = start
        self.served = 0

    def pair(self, fresh_world: bool, confirming: bool) -> BlockPair:
        try:
            pair = next(self._pairs)
        except StopIteration:
            raise ValueError(f"the list of block pairs ran out after {self.served} pair(s)") from None
        self.served += 1
        self.clock += self.seconds_per_pair
        return pair

    def now(self) -> float:
        return self.clock
