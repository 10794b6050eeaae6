"""A case's thresholds, one per figure kind: CPU time is judged at its own, every other figure at the case's.

CPU time per step is several times quieter than wall time (``docs/explanation/statistics.md``), so it is
judged against a tighter threshold of its own (``--dmlbench-cpu-threshold``, ini ``dmlbench_cpu_threshold``,
marker ``cpu_threshold=``), and only where one is given: recorded always, judged on request. Wall time keeps
``--dmlbench-threshold``.
"""

from __future__ import annotations

from dataclasses import dataclass

from pytest_dmlbench.config import CPU_OFF, parse_cpu_threshold, parse_threshold
from pytest_dmlbench.gates.figures import CPU_TIME_METRICS
from pytest_dmlbench.results import CaseResult


@dataclass(frozen=True)
class Thresholds:
    """``default_pct`` for every figure; ``cpu_pct`` for CPU time (None: CPU time is not judged)."""

    default_pct: float
    cpu_pct: float | None = None

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
            return Thresholds(default, self.cpu_pct)
        cpu = parse_cpu_threshold(case.cpu_threshold_pct, f"cpu_threshold of {case.nodeid}")
        return Thresholds(default, None if cpu == CPU_OFF else float(cpu))

    @classmethod
    def of_case(cls, threshold: float | Thresholds) -> Thresholds:
        """``threshold`` as thresholds: a bare number is every figure's."""
        return threshold if isinstance(threshold, Thresholds) else cls(threshold)
