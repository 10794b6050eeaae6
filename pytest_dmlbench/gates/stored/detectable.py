"""The smallest change a stored-baseline verdict could have detected, from the noise it measured.

Rounds inside a run are autocorrelated (a shared machine has slow phases lasting seconds), so the noise is
measured on *blocks*: contiguous groups of rounds, each summarised by its median. With ``b`` baseline and
``c`` current blocks whose log medians have pooled standard deviation ``s``, a one-sided test at ``alpha``
catches a shift with probability ``power`` once it exceeds ``(t(1-alpha) + t(power)) * s * sqrt(1/b + 1/c)``.
When the baseline was saved several times, the run-to-run spread of those saves bounds it too (whole runs
differ by more than blocks inside one run on a shared machine). Pure functions, no I/O.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from pytest_dmlbench.gates.stored.significance import block_samples
from pytest_dmlbench.results.student_t import POWER, student_t_quantile


def detectable_within_run_pct(baseline: Sequence[float], current: Sequence[float], alpha: float) -> float | None:
    """The smallest change (percent) the blocks of these two runs could reveal; None when either run has
    fewer than two blocks or a non-positive block median (no log scale)."""
    blocks = block_samples(baseline, current)
    if blocks is None or not blocks.log_scale:
        return None
    t_sum = student_t_quantile(1.0 - alpha, blocks.df) + student_t_quantile(POWER, blocks.df)
    return 100.0 * (math.exp(t_sum * blocks.scale) - 1.0)


def detectable_between_runs_pct(log_spread: float, runs: int, alpha: float) -> float:
    """The smallest change (percent) a prediction test against ``runs`` saved runs with this log-scale
    run-to-run spread could reveal."""
    t_sum = student_t_quantile(1.0 - alpha, runs - 1) + student_t_quantile(POWER, runs - 1)
    return 100.0 * (math.exp(t_sum * log_spread * math.sqrt(1.0 + 1.0 / runs)) - 1.0)


def detectable_pct(baseline: Sequence[float], current: Sequence[float], alpha: float, log_spread: float | None,
                   runs: int) -> float | None:
    """The smallest change (percent) the whole rule could reveal: the larger of what the blocks of the two
    runs and the spread of the saved runs allow; None when the blocks give no log scale."""
    within = detectable_within_run_pct(baseline, current, alpha)
    if within is None:
        return None
    if log_spread is not None and runs >= 3:
        return max(within, detectable_between_runs_pct(log_spread, runs, alpha))
    return within
