"""The one place a finished case becomes its :class:`~pytest_dmlbench.results.CaseResult`.

Inputs: every rank's outcome (figures are rank-agreed, so rank 0's are kept; memory peaks are maxed over
ranks), or figures recorded in the pytest process itself (``dmlbench_metrics``); for ``scaling=True``
cases, ``speedup`` and ``scaling_efficiency`` against the same case's one-rank variant. Imports no pytest.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from pytest_dmlbench.measure.memory import peak_memory_metrics
from pytest_dmlbench.measure.rounds import BlockBudget
from pytest_dmlbench.results import Better, CaseResult, MetricResult
from pytest_dmlbench.world.messages import RankOutcome


def params_of(callspec_params: Mapping[str, Any]) -> dict[str, str]:
    """Parameters as stable strings (what baselines are matched and shown by)."""
    return {str(k): repr(v) if not isinstance(v, str) else v for k, v in callspec_params.items()}


@dataclass(frozen=True)
class Scaling:
    """A ``scaling=True`` variant: the family of its world sizes (same function, same other parameters)."""

    family: str
    world_size: int


@dataclass(frozen=True)
class CaseFacts:
    """What a result records about the item besides its figures."""

    nodeid: str
    params: dict[str, str]
    world_size: int
    backend: str
    threshold_pct: float | None
    scaling: Scaling | None = None
    cpu_threshold_pct: float | str | None = None  # the marker's or file's ("off": unjudged; None: the run's)


class LocalMetrics:
    """The ``dmlbench_metrics`` fixture: record figures measured in the pytest process itself."""

    def __init__(self) -> None:
        self.metrics: dict[str, MetricResult] = {}
        self.notes: list[str] = []
        self.block: BlockBudget | None = None  # set while the paired gate re-runs the test as one block

    def record(self, name: str, samples: Iterable[float] | float, *, unit: str | None = None,
               better: Better = None) -> MetricResult:
        """Add a metric (registered names carry their unit and direction; others need ``unit``)."""
        metric = MetricResult.recorded(name, samples, unit, better)
        self.metrics[name] = metric
        return metric


@dataclass
class CaseResultBuilder:
    """Builds each case's result; remembers one-rank throughputs for the scaling figures of later sizes."""

    _single_rank_throughput: dict[str, float] = field(default_factory=dict)

    def from_ranks(self, facts: CaseFacts, outcomes: Sequence[RankOutcome | None]) -> CaseResult | None:
        """The result of a case that passed on every rank; None when it recorded no figure."""
        first = outcomes[0] if outcomes else None
        if first is None or not first.metrics:
            return None
        peaks = [o.peak_memory for o in outcomes if o is not None and o.peak_memory is not None]
        metrics = {**peak_memory_metrics(peaks), **first.metrics}
        case = self._new(facts, metrics, list(first.notes))
        self._add_scaling(facts, case)
        return case

    def from_local(self, facts: CaseFacts, local: LocalMetrics) -> CaseResult | None:
        """The result of a test that recorded figures in the pytest process; None when it recorded none."""
        if not local.metrics:
            return None
        return self._new(facts, local.metrics, list(local.notes))

    @staticmethod
    def _new(facts: CaseFacts, metrics: Mapping[str, MetricResult], notes: list[str]) -> CaseResult:
        return CaseResult(nodeid=facts.nodeid, params=dict(facts.params), world_size=facts.world_size,
                          backend=facts.backend, metrics=dict(metrics), threshold_pct=facts.threshold_pct,
                          cpu_threshold_pct=facts.cpu_threshold_pct,
                          extra={"notes": notes} if notes else {})

    def _add_scaling(self, facts: CaseFacts, case: CaseResult) -> None:
        """``speedup`` and ``scaling_efficiency`` per round: throughput(N) of each round / median
        throughput(1) of the same family. The one-rank variant must have run in this process first (it
        does, unless xdist sent it to another worker; then a note says so)."""
        throughput = case.metrics.get("throughput_samples_per_s")
        if facts.scaling is None or throughput is None:
            return
        if facts.scaling.world_size == 1:
            self._single_rank_throughput[facts.scaling.family] = throughput.stats.median
            return
        single = self._single_rank_throughput.get(facts.scaling.family)
        if single is None or not single > 0:
            case.extra.setdefault("notes", []).append(
                "speedup not computed: the ws1 variant of this case did not run in this process first")
            return
        speedup = [t / single for t in throughput.samples]
        case.add(MetricResult.of("speedup", speedup))
        case.add(MetricResult.of("scaling_efficiency", [s / facts.scaling.world_size for s in speedup]))
