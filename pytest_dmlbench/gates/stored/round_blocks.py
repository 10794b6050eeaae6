"""Rounds of one run cut into contiguous blocks, each summarised by its median.

Rounds inside a run are autocorrelated (a shared machine has slow phases lasting seconds), so they are not
independent samples; blocks of rounds are closer to it. Used by the stored-baseline test and by the
smallest-detectable-change figure. Pure functions, no I/O.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from pytest_dmlbench.results.stats import median

MIN_BLOCK_ROUNDS = 5
TARGET_BLOCKS = 8


def block_medians(samples: Sequence[float]) -> list[float]:
    """Medians of contiguous blocks of rounds (about :data:`TARGET_BLOCKS` blocks of at least
    :data:`MIN_BLOCK_ROUNDS` rounds; a short tail joins the last block); NaN rounds dropped."""
    kept = [s for s in samples if not math.isnan(s)]
    size = max(MIN_BLOCK_ROUNDS, len(kept) // TARGET_BLOCKS)
    count = len(kept) // size
    if count == 0:
        return []
    blocks = [kept[i * size:(i + 1) * size] for i in range(count - 1)] + [kept[(count - 1) * size:]]
    return [median(b) for b in blocks]


def on_log_scale(values: Sequence[float]) -> bool:
    """Whether every value is finite and positive, so that ratios (log differences) exist."""
    return all(math.isfinite(v) and v > 0 for v in values)
