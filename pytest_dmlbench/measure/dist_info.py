"""The ``dist`` fixture's value on a rank: who this rank is in its world."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class DistInfo:
    """Rank, world size, backend and device of the rank running the case."""

    rank: int
    world_size: int
    backend: str
    device: str

    @property
    def is_main(self) -> bool:
        """True on rank 0."""
        return self.rank == 0
