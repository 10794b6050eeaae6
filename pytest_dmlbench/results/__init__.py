"""The results model: metric definitions, per-case records and the JSON schema (version 2).

The package around it holds what reads and shows results and nothing that runs a case: :mod:`.stats` (the
summary statistics) and :mod:`.student_t` (the t distribution both gates test with), :mod:`.units`,
:mod:`.table` and :mod:`.table_layout` (the cells and the terminal table), :mod:`.report` (the run's
report) and :mod:`.jsonio` (strict, atomic JSON reading and writing).

The same JSON is written by ``--dmlbench-json`` and stored as a baseline file::

    {"schema": 2, "machine": {...fingerprint...}, "created": "2026-11-22T10:00:00+00:00",
     "run": {"world_size": 4, "xdist_workers": 0, "oversubscribed": true, ...},
     "cases": [{"nodeid": "...", "params": {...}, "world_size": 4, "backend": "gloo",
                "outcome": "passed", "metrics": {"step_time_s": {"unit": "s", "better": "lower",
                "samples": [...], "stats": {"median": ..., ...}}}, "verdicts": [...]}]}
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from pytest_dmlbench.results.stats import Summary, summarize

SCHEMA_VERSION = 2  # 2: baselines keyed by world size, backend, launcher, isolation (run facts record them)

Direction = Literal["higher", "lower"]
Better = Direction | None  # None: an informational metric, never judged
VerdictKind = Literal["regression", "improvement", "inconclusive", "new", "unchanged"]
# Most severe first (the order reports list them in); the first two are changes beyond the threshold.
# "inconclusive": no test was possible (the verdict says why); "unchanged": a test ran and found no change
# beyond the threshold (the verdict states the smallest change it could have detected).
VERDICT_KINDS: tuple[VerdictKind, ...] = ("regression", "improvement", "inconclusive", "new", "unchanged")
CHANGE_KINDS: frozenset[VerdictKind] = frozenset({"regression", "improvement"})
# What every view names and explains: the changes, and the figures no test could judge.
NOTABLE_KINDS: frozenset[VerdictKind] = CHANGE_KINDS | {"inconclusive"}
InconclusiveCause = Literal["untestable", "unsettled"]
# Why a figure is inconclusive: "untestable", no test could run (too few blocks, one reading, no finite or
# no positive samples, a unit that changed, a figure REF cannot re-measure, no saved run-to-run noise);
# "unsettled", a test ran and could not settle the threshold either way (a pair budget spent while the
# interval still straddled it, single readings whose blocks overlap): the verdict states what it found.
INCONCLUSIVE_CAUSES: tuple[InconclusiveCause, ...] = ("untestable", "unsettled")
PairedScale = Literal["ratio", "points"]
PairedStage = Literal["first", "confirmation"]
PAIRED_SCALES: tuple[PairedScale, ...] = ("ratio", "points")
PAIRED_STAGES: tuple[PairedStage, ...] = ("first", "confirmation")


@dataclass(frozen=True)
class MetricSpec:
    """A named metric: its unit and which direction is better (None: informational, never compared)."""

    name: str
    unit: str
    better: Better
    description: str


METRICS: dict[str, MetricSpec] = {
    spec.name: spec
    for spec in (
        MetricSpec("step_time_s", "s", "lower", "wall time of one step, max over ranks, per round"),
        MetricSpec("cpu_time_s", "s", "lower",
                   "CPU time the ranks spend on one step (computing thread, or whole process with an intra-op "
                   "pool), summed over ranks, per round; waiting is not counted"),
        MetricSpec("throughput_samples_per_s", "samples/s", "higher", "global samples processed / step time"),
        MetricSpec("exposed_comm_fraction", "fraction", "lower", "1 - T(no-comm twin) / T(step), medians"),
        MetricSpec("comm_busy_fraction", "fraction", "lower", "time inside collectives / step time"),
        MetricSpec("comm_bytes_per_step", "bytes", "lower", "payload bytes this rank hands to collectives"),
        MetricSpec("collective_calls_per_step", "calls", "lower",
                   "collectives this rank calls in one step (exact; max over ranks); any change is a regression"),
        MetricSpec("flops_per_step", "FLOP", "lower",
                   "floating-point operations of one step, summed over ranks (torch's flop counter, exact)"),
        MetricSpec("compute_comm_ratio", "ratio", None, "compute time / communication time per step"),
        MetricSpec("algbw_gbps", "GB/s", "higher", "bytes / time (nccl-tests algbw)"),
        MetricSpec("busbw_gbps", "GB/s", "higher", "algbw x collective factor (nccl-tests busbw)"),
        MetricSpec("memcpy_gbps", "GB/s", None, "memory-copy bandwidth measured in the same run (ceiling)"),
        MetricSpec("peak_rss_mb", "MB", "lower",
                   "peak resident memory during the case (rank start-up size + the case's rise), max over ranks"),
        MetricSpec("peak_cuda_mb", "MB", "lower", "torch.cuda.max_memory_allocated, max over ranks"),
        MetricSpec("speedup", "x", "higher", "throughput(N) / throughput(1)"),
        MetricSpec("scaling_efficiency", "fraction", "higher", "speedup / N"),
        MetricSpec("accuracy", "fraction", "higher", "share of correctly classified evaluation samples"),
        MetricSpec("attack_success_rate", "fraction", "lower", "share of triggered inputs sent to the target"),
        MetricSpec("time_to_accuracy_s", "s", "lower", "wall time until the target accuracy is reached"),
        MetricSpec("bubble_fraction", "fraction", "lower", "idle share of a pipeline schedule"),
        MetricSpec("total_time_s", "s", "lower", "experiment: training wall time, all epochs"),
        MetricSpec("epoch_time_s", "s", "lower", "experiment: wall time of one epoch, max over ranks, per epoch"),
        MetricSpec("loss", "nats", None, "experiment: mean cross-entropy training loss of one epoch, per epoch"),
        MetricSpec("world_start_s", "s", "lower", "time to start a rank world"),
        MetricSpec("dispatch_overhead_s", "s", "lower", "time to run a trivial case on every rank"),
    )
}


CALLS_TOTAL = "collective_calls_per_step"
CALLS_BY_KIND_PREFIX = f"{CALLS_TOTAL}."
"""``collective_calls_per_step.<kind>``: the calls of one kind (``all_reduce``, ``broadcast``, ...) a step makes; a
figure of its own for every kind a step calls."""


def calls_metric(kind: str) -> str:
    """The name of the figure counting ``kind``'s calls per step (``collective_calls_per_step.all_reduce``)."""
    return f"{CALLS_BY_KIND_PREFIX}{kind}"


def call_kind(name: str) -> str | None:
    """The collective kind a calls-by-kind figure counts, or None for any other figure."""
    if name.startswith(CALLS_BY_KIND_PREFIX) and len(name) > len(CALLS_BY_KIND_PREFIX):
        return name[len(CALLS_BY_KIND_PREFIX):]
    return None


def oversubscribed_world(world_size: int, xdist_workers: int, cores: int) -> bool:
    """The one oversubscription rule: the ranks of every pytest-xdist worker together exceed the cores, so
    the timings share CPUs (and are pessimistic). The run facts record it and the reports flag it by it."""
    return world_size * max(1, xdist_workers) > cores


def spec_for(name: str, unit: str | None = None, better: Better = None) -> MetricSpec:
    """The registered spec of ``name``, or an ad-hoc one for a user metric (``unit`` required then)."""
    if name in METRICS:
        return METRICS[name]
    kind = call_kind(name)
    if kind is not None:
        return MetricSpec(name, "calls", "lower", f"{kind} calls this rank makes in one step (exact; max over ranks); "
                          "any change is a regression")
    return MetricSpec(name, unit or "", better, "user metric")


@dataclass
class MetricResult:
    """One metric of one case: its raw samples and their summary.

    ``history`` is kept in baseline files only: the medians of earlier saved runs of the same case, oldest
    first, which measure how much whole runs differ from each other (see ``gates/stored/between_runs.py``).
    """

    name: str
    unit: str
    better: Better
    samples: list[float]
    history: list[float] = field(default_factory=list)

    @property
    def stats(self) -> Summary:
        return summarize(self.samples)

    @classmethod
    def of(cls, name: str, samples: Sequence[float], unit: str | None = None, better: Better = None) -> MetricResult:
        spec = spec_for(name, unit, better)
        return cls(name, spec.unit, spec.better, [float(s) for s in samples])

    @classmethod
    def recorded(cls, name: str, samples: Iterable[float] | float, unit: str | None = None,
                 better: Better = None) -> MetricResult:
        """A metric a user records: one number or an iterable of samples (at least one)."""
        values = [float(samples)] if isinstance(samples, int | float) else [float(s) for s in samples]
        if not values:
            raise ValueError(f"metric {name!r}: no samples given")
        return cls.of(name, values, unit, better)

    def to_dict(self) -> dict[str, Any]:
        data = {
            "unit": self.unit,
            "better": self.better,
            "samples": [_json_float(s) for s in self.samples],
            "stats": {k: (v if k == "rounds" else _json_float(v)) for k, v in self.stats.to_dict().items()},
        }
        if self.history:
            data["history"] = [_json_float(m) for m in self.history]
        return data

    @classmethod
    def from_dict(cls, name: str, data: Mapping[str, Any]) -> MetricResult:
        better = data.get("better")
        if better not in ("higher", "lower", None):
            raise ValueError(f"metric {name!r}: 'better' must be 'higher', 'lower' or null, got {better!r}")
        samples = data["samples"]
        history = data.get("history", [])
        if not isinstance(samples, list) or not isinstance(history, list):
            raise ValueError(f"metric {name!r}: 'samples' and 'history' must be lists")
        return cls(
            name,
            str(data.get("unit", "")),
            better,
            [_from_json_float(s) for s in samples],
            [_from_json_float(m) for m in history],
        )


@dataclass(frozen=True)
class PairedEvidence:
    """The paired estimate a block-pair verdict rests on: its deciding stage's, A against B in the bad direction.

    ``estimate`` is the geometric mean of the pairs' ratios on the "ratio" scale (1.074: 7.4 % worse), or
    the mean difference in fraction units on the "points" scale (0.031: 3.1 pp worse); ``ci_low`` and
    ``ci_high`` bound it at ``confidence`` (each bound one-sided at half the rest). A paired verdict's figures
    are REF's block median and that median moved by this estimate, so its ``ratio`` and printed change are this
    estimate in the figure's own direction (results written before 0.4 held the two sides' own medians)."""

    scale: PairedScale
    estimate: float
    ci_low: float
    ci_high: float
    confidence: float
    pairs: int
    noise_pct: float  # per-pair noise: percent on the "ratio" scale, percentage points on the "points" scale
    stage: PairedStage

    def to_dict(self) -> dict[str, Any]:
        return {"scale": self.scale, "estimate": _json_float(self.estimate), "ci_low": _json_float(self.ci_low),
                "ci_high": _json_float(self.ci_high), "confidence": self.confidence, "pairs": self.pairs,
                "noise_pct": _json_float(self.noise_pct), "stage": self.stage}

    @classmethod
    def from_dict(cls, data: Any) -> PairedEvidence:
        if not isinstance(data, Mapping):
            raise ValueError(f"verdict: 'paired' must be an object, got {data!r}")
        scale, stage, pairs = data.get("scale"), data.get("stage"), data.get("pairs")
        if scale not in PAIRED_SCALES:
            raise ValueError(f"verdict: 'paired.scale' must be one of {', '.join(PAIRED_SCALES)}, got {scale!r}")
        if stage not in PAIRED_STAGES:
            raise ValueError(f"verdict: 'paired.stage' must be one of {', '.join(PAIRED_STAGES)}, got {stage!r}")
        if isinstance(pairs, bool) or not isinstance(pairs, int) or pairs < 2:
            raise ValueError(f"verdict: 'paired.pairs' must be a whole number of at least 2, got {pairs!r}")
        return cls(scale, _from_json_float(data.get("estimate")), _from_json_float(data.get("ci_low")),
                   _from_json_float(data.get("ci_high")), _from_json_float(data.get("confidence")), pairs,
                   _from_json_float(data.get("noise_pct")), stage)


@dataclass
class Verdict:
    """The comparison of one metric with its baseline."""

    metric: str
    kind: VerdictKind
    baseline_median: float | None
    current_median: float | None
    ratio: float | None
    threshold_pct: float
    p_value: float | None
    message: str
    between_runs_p: float | None = None
    baseline_runs: int = 1
    change: str = ""  # the worded change ("+18.8 % slower"), the same text in every view
    detectable_pct: float | None = None  # smallest change the test could have detected (unchanged verdicts)
    cause: InconclusiveCause | None = None  # inconclusive verdicts only: untestable or unsettled
    paired: PairedEvidence | None = None  # the paired gate's estimate, where a test on block pairs ran

    @property
    def inconclusive_cause(self) -> InconclusiveCause | None:
        """Why an inconclusive verdict is so (older files, without a cause, read as untestable); None otherwise."""
        if self.kind != "inconclusive":
            return None
        return "unsettled" if self.cause == "unsettled" else "untestable"

    @property
    def untestable(self) -> bool:
        """An inconclusive verdict on which no test could run."""
        return self.inconclusive_cause == "untestable"

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "metric": self.metric,
            "kind": self.kind,
            "baseline_median": _json_float(self.baseline_median),
            "current_median": _json_float(self.current_median),
            "ratio": _json_float(self.ratio),
            "threshold_pct": self.threshold_pct,
            "p_value": _json_float(self.p_value),
            "between_runs_p": _json_float(self.between_runs_p),
            "baseline_runs": self.baseline_runs,
            "change": self.change,
            "detectable_pct": _json_float(self.detectable_pct),
            "message": self.message,
        }
        if self.inconclusive_cause is not None:
            data["inconclusive_cause"] = self.inconclusive_cause
        if self.paired is not None:
            data["paired"] = self.paired.to_dict()
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Verdict:
        return cls(
            metric=data["metric"],
            kind=data["kind"],
            baseline_median=_optional_float(data.get("baseline_median")),
            current_median=_optional_float(data.get("current_median")),
            ratio=_optional_float(data.get("ratio")),
            threshold_pct=float(data["threshold_pct"]),
            p_value=_optional_float(data.get("p_value")),
            message=str(data.get("message", "")),
            between_runs_p=_optional_float(data.get("between_runs_p")),
            baseline_runs=int(data.get("baseline_runs", 1)),
            change=str(data.get("change", "")),
            detectable_pct=_optional_float(data.get("detectable_pct")),
            cause=_cause(data.get("inconclusive_cause")),
            paired=None if data.get("paired") is None else PairedEvidence.from_dict(data["paired"]),
        )


def _cause(value: Any) -> InconclusiveCause | None:
    if value is None:
        return None
    for cause in INCONCLUSIVE_CAUSES:
        if value == cause:
            return cause
    raise ValueError(f"verdict: 'inconclusive_cause' must be one of {', '.join(INCONCLUSIVE_CAUSES)}, got {value!r}")


@dataclass
class CaseResult:
    """Everything recorded for one test item."""

    nodeid: str
    params: dict[str, str]
    world_size: int
    backend: str
    outcome: str = "passed"
    metrics: dict[str, MetricResult] = field(default_factory=dict)
    verdicts: list[Verdict] = field(default_factory=list)
    threshold_pct: float | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    cpu_threshold_pct: float | str | None = None  # the case's own CPU-time threshold ("off": unjudged; None: the run's)

    def add(self, metric: MetricResult) -> None:
        self.metrics[metric.name] = metric

    def to_dict(self) -> dict[str, Any]:
        return {
            "nodeid": self.nodeid,
            "params": dict(self.params),
            "world_size": self.world_size,
            "backend": self.backend,
            "outcome": self.outcome,
            "threshold_pct": self.threshold_pct,
            **({"cpu_threshold_pct": self.cpu_threshold_pct} if self.cpu_threshold_pct is not None else {}),
            "metrics": {name: m.to_dict() for name, m in self.metrics.items()},
            "verdicts": [v.to_dict() for v in self.verdicts],
            "extra": self.extra,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> CaseResult:
        return cls(
            nodeid=str(data["nodeid"]),
            params={str(k): str(v) for k, v in dict(data.get("params", {})).items()},
            world_size=int(data["world_size"]),
            backend=str(data["backend"]),
            outcome=str(data.get("outcome", "passed")),
            metrics={n: MetricResult.from_dict(n, m) for n, m in dict(data.get("metrics", {})).items()},
            verdicts=[Verdict.from_dict(v) for v in data.get("verdicts", [])],
            threshold_pct=data.get("threshold_pct"),
            extra=dict(data.get("extra", {})),
            cpu_threshold_pct=data.get("cpu_threshold_pct"),
        )


@dataclass
class RunResults:
    """A whole run: machine fingerprint, run facts and the cases."""

    machine: dict[str, Any]
    created: str
    run: dict[str, Any] = field(default_factory=dict)
    cases: list[CaseResult] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {
            "schema": SCHEMA_VERSION,
            "machine": self.machine,
            "created": self.created,
            "run": self.run,
            "cases": [c.to_dict() for c in self.cases],
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> RunResults:
        """Parse a schema-2 document; raises ValueError (or KeyError/TypeError) on a malformed one."""
        schema = data.get("schema")
        if schema != SCHEMA_VERSION:
            older = (" (written by an older pytest-dmlbench with the old baseline layout: re-save it with "
                     "--dmlbench-save, or read it with pip install 'pytest-dmlbench<0.3')") if schema == 1 else ""
            raise ValueError(f"schema {schema!r} is not supported (this version reads schema {SCHEMA_VERSION}){older}")
        return cls(
            machine=dict(data["machine"]),
            created=str(data.get("created", "")),
            run=dict(data.get("run", {})),
            cases=[CaseResult.from_dict(c) for c in data["cases"]],
        )


def _json_float(x: float | None) -> float | str | None:
    """JSON has no NaN/inf: encode them as strings so files stay strict JSON."""
    if x is None:
        return None
    x = float(x)
    if math.isnan(x):
        return "nan"
    if math.isinf(x):
        return "inf" if x > 0 else "-inf"
    return x


def _from_json_float(x: Any) -> float:
    if x is None:
        return float("nan")
    if isinstance(x, str):
        if x in ("nan", "inf", "-inf"):
            return float(x)
        raise ValueError(f"not a number: {x!r}")
    if isinstance(x, bool) or not isinstance(x, int | float):
        raise ValueError(f"not a number: {x!r}")
    return float(x)


def _optional_float(x: Any) -> float | None:
    """Like _from_json_float, but null stays None (a verdict field that does not apply)."""
    return None if x is None else _from_json_float(x)
