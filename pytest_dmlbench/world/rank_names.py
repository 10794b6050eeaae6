"""How a report names a set of ranks: one by one for a few, as spans for a simulated world of 1024."""

from __future__ import annotations

# Up to this many ranks are listed one by one; more (simulated worlds of 1024) as spans: 0-11, 13-1023.
LISTED_ONE_BY_ONE = 16


def rank_spans(ranks: list[int]) -> str:
    """Consecutive ranks as spans: ``0-11, 13, 15-1023``."""
    spans: list[list[int]] = []
    for rank in sorted(ranks):
        if spans and rank == spans[-1][1] + 1:
            spans[-1][1] = rank
        else:
            spans.append([rank, rank])
    return ", ".join(str(a) if a == b else f"{a}-{b}" for a, b in spans)


def rank_list(ranks: list[int]) -> str:
    """``0, 1, 2`` for a few ranks; :func:`rank_spans` for more than ``LISTED_ONE_BY_ONE``."""
    if len(ranks) > LISTED_ONE_BY_ONE:
        return rank_spans(ranks)
    return ", ".join(str(rank) for rank in sorted(ranks))
