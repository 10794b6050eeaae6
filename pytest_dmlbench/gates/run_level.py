"""The run-level rule of the paired gate: how likely a whole run is to turn red when nothing changed.

Each item still fails on its own as it finishes, but at a level chosen for the whole run (Bonferroni): the
run's chance of a red for nothing, ``run_alpha`` (``--dmlbench-run-alpha``, default 1 %), is split evenly
over the cases that record figures (counted at collection) and, within a case, over the distinct tests it
makes on block pairs (its timed figures, its derived speedups and its memory peaks; an exact count is compared
exactly and spends none): figures that are one reading in every first-stage pair (a bandwidth computed from the
step time, :mod:`pytest_dmlbench.gates.paired.one_reading`) are one test and count once. A figure fails
only when the confirmation stage, an independent second set of block pairs, finds it beyond the threshold
at that split level; the first stage flags candidates at the ordinary per-figure level (1 %) and costs no
guarantee. So for ``m`` distinct tests the chance that any of them fails on unchanged code is at most
``run_alpha`` (the union bound), whatever the tests' correlation.

At the end of the run, a Benjamini-Hochberg pass over every tested figure's first-stage p-value gives a
*watch list* at a false-discovery rate ``q``: figures that moved together more than chance explains, shown
in the summary and never failing.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from pytest_dmlbench.config import DEFAULT_RUN_ALPHA
from pytest_dmlbench.results.student_t import DEFAULT_ALPHA

WATCH_FDR = 0.10


@dataclass(frozen=True)
class RunLevelRule:
    """``run_alpha`` split over ``judged_cases`` cases, and within a case over its tested figures."""

    run_alpha: float = DEFAULT_RUN_ALPHA
    judged_cases: int = 1
    two_stage: bool = False
    """Count the first stage's level too: confirm at ``run_alpha / (m * alpha_1)``, since a figure fails only
    when both stages flag it and, were their pairs independent, the chance of that is the product. The gate does
    not use it: replayed nights read 4.3 % red with it (``studies/replay_nights.py --two-stage``), for a world's
    offset is shared by both stages' pairs."""

    def __post_init__(self) -> None:
        if not 0.0 < self.run_alpha < 0.5:
            raise ValueError(f"run_alpha must lie in (0, 0.5), got {self.run_alpha}")
        if self.judged_cases < 0:
            raise ValueError(f"judged_cases must be >= 0, got {self.judged_cases}")

    def figure_alpha(self, tests: int) -> float:
        """The level one of a case's ``tests`` distinct tests is confirmed at; never above the ordinary
        per-figure level, so a run of one case is no laxer than the first stage."""
        first_stage = DEFAULT_ALPHA if self.two_stage else 1.0
        share = self.run_alpha / (max(1, self.judged_cases) * max(1, tests) * first_stage)
        return min(DEFAULT_ALPHA, share)

    def statement(self) -> str:
        """The rule and its guarantee, for the run's summary."""
        return (f"run-level rule: at most {100 * self.run_alpha:g} % chance of a red run on unchanged code "
                f"(--dmlbench-run-alpha), split over {self.judged_cases} case(s) that record figures and over "
                "each case's distinct tests, every judged figure counted (timed ones, figures that are one reading "
                "once, derived speedups and memory peaks; exact counts are compared exactly and spend none) "
                f"(Bonferroni); confirmed at {self.figure_alpha(1):.3g} per figure for a case of one")


def benjamini_hochberg(p_values: Sequence[float], q: float = WATCH_FDR) -> list[int]:
    """Indices of the discoveries among ``p_values`` at false-discovery rate ``q`` (step-up: the largest
    ``k`` with ``p_(k) <= k q / m``, and every p-value at or below ``p_(k)``), in input order."""
    if not 0.0 < q < 1.0:
        raise ValueError(f"q must lie in (0, 1), got {q}")
    m = len(p_values)
    order = sorted(range(m), key=lambda i: p_values[i])
    cutoff = 0
    for rank, index in enumerate(order, start=1):
        if p_values[index] <= rank * q / m:
            cutoff = rank
    return sorted(order[:cutoff])
