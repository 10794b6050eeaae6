"""Which figures both gates judge alike: the lists the stored and the paired gate share, below both.

The named figures are listed in sets; collective calls counted by kind (``collective_calls_per_step.<kind>``,
:mod:`pytest_dmlbench.results.figures`) are named per kind a step calls, so the predicates below take them in.
"""

from __future__ import annotations

from collections.abc import Collection

from pytest_dmlbench.results import CALLS_TOTAL, call_kind

# Collective calls a step makes: an exact count in which any change, fewer calls or more, is a regression (a
# skipped synchronisation is as wrong as an added one), whatever the threshold. The calls of each kind are
# counts of the same sort (:func:`is_call_count`).
CALL_COUNT_METRICS = frozenset({CALLS_TOTAL})

# Exact counts: the same work reads the same number every time, so two readings are compared exactly (equal,
# or a difference that is the change itself, judged by the threshold; calls by any change); no test runs and
# none spends alpha.
EXACT_COUNT_METRICS = frozenset({"comm_bytes_per_step", "flops_per_step"}) | CALL_COUNT_METRICS

# Memory peaks: read once per block, steady within one world but offset between worlds (a process's allocator
# state), so they are tested over readings from several worlds, or with the measured offset allowed for.
MEMORY_PEAK_METRICS = frozenset({"peak_rss_mb", "peak_cuda_mb"})

# Counts and peaks rather than timings: one reading per block rather than one per round.
SINGLE_READING_METRICS = EXACT_COUNT_METRICS | MEMORY_PEAK_METRICS

# CPU time per step: a timed figure judged on block pairs like wall time, at a threshold of its own
# (gates/thresholds.py): it is the quiet one, and it does not see waiting.
CPU_TIME_METRICS = frozenset({"cpu_time_s"})


def is_call_count(name: str) -> bool:
    """Collective calls per step, in total or of one kind: any change is a regression."""
    return name in CALL_COUNT_METRICS or call_kind(name) is not None


def is_exact_count(name: str) -> bool:
    """An exact count (bytes, FLOPs, calls in total or by kind): compared exactly, no test, no alpha."""
    return name in EXACT_COUNT_METRICS or is_call_count(name)


def is_single_reading(name: str) -> bool:
    """A count or a peak: one reading per block rather than one per round."""
    return name in SINGLE_READING_METRICS or is_call_count(name)


def counts_by_kind(names: Collection[str], total_calls: float | None) -> bool:
    """Whether a side that records the figures ``names`` counted its calls by kind, so that a kind it lacks is zero
    calls of it: it records the total and some kind, or a total of none at all. A side recorded before calls were
    counted by kind records the total alone, and its kinds are unknown (a figure it lacks is ``new``)."""
    if total_calls is None:
        return False
    return total_calls == 0 or any(call_kind(n) is not None for n in names)
