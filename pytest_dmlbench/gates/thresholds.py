"""A case's thresholds, one per figure kind: CPU time is judged at its own, every other figure at the case's.

CPU time per step is judged against a threshold of its own (``--dmlbench-cpu-threshold``, ini
``dmlbench_cpu_threshold``, marker ``cpu_threshold=``, the per-case file); without one, at the default
(``DEFAULT_CPU_THRESHOLD_PCT``) and only on a step that computes (:mod:`pytest_dmlbench.gates.computing_share`).
Wall time keeps ``--dmlbench-threshold``.
"""

from __future__ import annotations

from dataclasses import dataclass

from pytest_dmlbench.config import CPU_OFF, parse_cpu_threshold, parse_threshold
from pytest_dmlbench.gates.computing_share import MIN_COMPUTING_SHARE, computing_share, waiting_note
from pytest_dmlbench.gates.figures import CPU_TIME_METRICS
from pytest_dmlbench.results import CaseResult
from pytest_dmlbench.world.run_facts import RunFacts


@dataclass(frozen=True)
class Thresholds:
    """``default_pct`` for every figure; ``cpu_pct`` for CPU time (None: CPU time is not judged), where
    ``cpu_where_computing`` (the default threshold) only on a step that computes, its ranks having ``cores``
    (None: this process's, :meth:`RunFacts.cores_per_world`)."""

    default_pct: float
    cpu_pct: float | None = None
    cpu_where_computing: bool = False
    cores: int | None = None

    def judges(self, metric: str) -> bool:
        """Whether ``metric`` is judged at all: CPU time only at a threshold of its own."""
        return metric not in CPU_TIME_METRICS or self.cpu_pct is not None

    def of(self, metric: str) -> float:
        """The threshold in percent (points for a fraction) that ``metric`` is judged against."""
        if metric in CPU_TIME_METRICS and self.cpu_pct is not None:
            return self.cpu_pct
        return self.default_pct

    def for_case(self, case: CaseResult) -> Thresholds:
        """``case``'s thresholds, these being the run's: the marker's ``threshold=`` and ``cpu_threshold=`` beat
        them (both gates)."""
        default = (self.default_pct if case.threshold_pct is None
                   else parse_threshold(case.threshold_pct, f"threshold of {case.nodeid}"))
        if case.cpu_threshold_pct is None:
            waits = self.waiting_note(case) is not None
            return Thresholds(default, None if waits else self.cpu_pct, self.cpu_where_computing, self.cores)
        cpu = parse_cpu_threshold(case.cpu_threshold_pct, f"cpu_threshold of {case.nodeid}")
        return Thresholds(default, None if cpu == CPU_OFF else float(cpu))

    def waiting_note(self, case: CaseResult) -> str | None:
        """Why ``case``'s CPU time goes unjudged where the default CPU threshold leaves a step that mostly waits;
        None where these thresholds judge it (or never would: no CPU threshold, or the case's own)."""
        if self.cpu_pct is None or not self.cpu_where_computing or case.cpu_threshold_pct is not None:
            return None
        cores = RunFacts.here(None).cores_per_world() if self.cores is None else self.cores
        share = computing_share(case.metrics, case.world_size, cores)
        return None if share is None or share >= MIN_COMPUTING_SHARE else waiting_note(share)

    @classmethod
    def of_case(cls, threshold: float | Thresholds) -> Thresholds:
        """``threshold`` as thresholds: a bare number is every figure's."""
        return threshold if isinstance(threshold, Thresholds) else cls(threshold)
