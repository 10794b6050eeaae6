"""Which figures both gates judge alike: the lists the stored and the paired gate share, below both."""

from __future__ import annotations

# Collective calls a step makes: an exact count in which any change, fewer calls or more, is a regression (a
# skipped synchronisation is as wrong as an added one), whatever the threshold.
CALL_COUNT_METRICS = frozenset({"collective_calls_per_step"})

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
