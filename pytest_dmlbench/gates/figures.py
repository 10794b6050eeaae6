"""Which figures both gates judge alike: the lists the stored and the paired gate share, below both."""

from __future__ import annotations

# Counts and peaks rather than timings (a byte count, a memory peak): not noisy the way times are, and often
# one reading per case, so they are judged by the threshold alone (and the saved runs, when there are three).
SINGLE_READING_METRICS = frozenset({"peak_rss_mb", "peak_cuda_mb", "comm_bytes_per_step"})
