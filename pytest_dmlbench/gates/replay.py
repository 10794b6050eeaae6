"""Replayed nights: the paired gate's own decision code fed block pairs recorded on this machine.

A paired run records every case's raw evidence in its results file (``extra.paired.block_medians``: per
stage, pair by pair, A's and B's block median of each figure). Pooled over whole-suite A/A runs (nothing
changed between A and B), these are draws of what a night's pairs look like here, slow phases included. A
replayed night sends every case through :meth:`PairedGate._decide` (first stage, confirmation at the
run-level share of alpha, verdicts) with pairs drawn by a moving-block bootstrap: runs of ``block``
consecutive recorded pairs of one run, so that a slow phase spanning neighbouring pairs stays together.
An injected slowdown multiplies A's values of one case by ``1 + s`` (divides them, for a higher-is-better
figure). Time is replayed too: each pair costs the case's recorded seconds per pair, so the pair budget
stops a replayed case where it stopped the real one. Derived figures (speedup) are not replayed. The canary
read beside each block (``extra.paired.block_medians[].canary``) is replayed with its pair, so a night can be
replayed with the canary adjustment on or off.
"""

from __future__ import annotations

import gzip
import json
import math
import random
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace
from typing import Any, cast

from pytest_dmlbench.gates.figures import SINGLE_READING_METRICS
from pytest_dmlbench.gates.gate import JudgedItem
from pytest_dmlbench.gates.paired.gate import CaseJudgement, PairedGate, Stage, Timed
from pytest_dmlbench.gates.paired.plan import BlockPlan
from pytest_dmlbench.gates.paired.statistics import SequentialRule
from pytest_dmlbench.gates.run_level import RunLevelRule
from pytest_dmlbench.gates.wording import fails
from pytest_dmlbench.results import Direction, MetricResult, Verdict
from pytest_dmlbench.results.student_t import DEFAULT_ALPHA

Pair = tuple[dict[str, float], dict[str, float]]  # A's and B's block medians, per figure (and the canary)
CANARY = "<canary>"
"""The key of the canary beside a side's block in a replayed pair (not a figure's name: figures are identifiers)."""


@dataclass
class RecordedCase:
    """One case's recorded pairs, pooled over runs (each run's pairs kept in their order)."""

    nodeid: str
    world_size: int
    threshold_pct: float
    figures: dict[str, tuple[str, Direction]]  # name -> (unit, better) of the figures tested on pairs
    runs: list[list[Pair]] = field(default_factory=list)
    seconds_per_pair: list[float] = field(default_factory=list)
    budget_s: float = 60.0

    @property
    def pairs(self) -> int:
        return sum(len(run) for run in self.runs)


def _pairs_of(stages: Sequence[Mapping[str, Any]], names: Sequence[str]) -> list[Pair]:
    """Each recorded pair's block medians of ``names``, and the canary beside each block where recorded."""
    pairs: list[Pair] = []
    for stage in stages:
        a, b = stage.get("a", {}), stage.get("b", {})
        canary = stage.get("canary") or {}
        for i in range(len(stage.get("a_first", []))):
            pair = ({n: float(a[n][i]) for n in names if n in a and i < len(a[n])},
                    {n: float(b[n][i]) for n in names if n in b and i < len(b[n])})
            for side, readings in zip(pair, (canary.get("a", []), canary.get("b", [])), strict=True):
                if i < len(readings):
                    side[CANARY] = float(readings[i])
            pairs.append(pair)
    return pairs


def load_recorded(paths: Sequence[Path], default_threshold_pct: float = 10.0,
                  run_threshold_pct: float | None = None) -> dict[str, RecordedCase]:
    """Every case with recorded block pairs in the results files ``paths`` (paired runs; ``.gz`` ones are read
    through gzip, as the recordings kept in ``ci/recordings/`` are), pooled by node id.
    ``run_threshold_pct`` replays under another run threshold (``--dmlbench-threshold``) than each file's own;
    a case's marker threshold stays. ValueError names a file that is not a paired run's results."""
    cases: dict[str, RecordedCase] = {}
    for path in paths:
        try:
            raw = Path(path).read_bytes()
            document = json.loads(gzip.decompress(raw) if str(path).endswith(".gz") else raw)
        except (OSError, ValueError, EOFError) as exc:
            raise ValueError(f"{path}: not a readable results file ({exc})") from None
        run_threshold = run_threshold_pct or (document.get("run") or {}).get("threshold_pct") or default_threshold_pct
        found = 0
        for case in document.get("cases", []):
            paired = (case.get("extra") or {}).get("paired") or {}
            stages = paired.get("block_medians") or []
            figures = {name: (m["unit"], m["better"]) for name, m in case.get("metrics", {}).items()
                       if m.get("better") in ("higher", "lower") and name not in SINGLE_READING_METRICS
                       and any(name in stage.get("a", {}) for stage in stages)}
            pairs = _pairs_of(stages, list(figures))
            if not pairs:
                continue
            found += 1
            recorded = cases.setdefault(case["nodeid"], RecordedCase(
                case["nodeid"], int(case.get("world_size") or 0),
                float(case.get("threshold_pct") or run_threshold), figures,
                budget_s=float(paired.get("budget_s") or 60.0)))
            recorded.figures.update(figures)
            recorded.runs.append(pairs)
            recorded.seconds_per_pair.append(float(paired.get("seconds") or 0.0) / len(pairs))
        if not found:
            raise ValueError(f"{path}: no case records block pairs (is it the results of a --dmlbench-against run "
                             "made with pytest-dmlbench 0.3 or later?)")
    return cases


def resampled(case: RecordedCase, rng: random.Random, block: int = 3) -> Iterator[Pair]:
    """Endless pairs of ``case``: runs of ``block`` consecutive recorded pairs from a randomly chosen run and
    start (a moving-block bootstrap; a run shorter than ``block`` gives all it has)."""
    if block < 1:
        raise ValueError(f"block must be >= 1, got {block}")
    usable = [run for run in case.runs if run]
    if not usable:
        raise ValueError(f"{case.nodeid}: no recorded pairs to resample")
    while True:
        run = rng.choice(usable)
        start = rng.randrange(max(1, len(run) - block + 1))
        yield from run[start:start + block]


def slowed(pair: Pair, figures: Mapping[str, tuple[str, Direction]], slowdown: float) -> Pair:
    """``pair`` with A made ``slowdown`` worse (0.1: 10 % slower, or 10 % less of a higher-is-better rate);
    a fraction (judged in points) rises or falls by ``slowdown`` of itself."""
    if slowdown == 0.0:
        return pair
    a = {name: value if name not in figures else
         value * (1.0 + slowdown) if figures[name][1] == "lower" else value / (1.0 + slowdown)
         for name, value in pair[0].items()}
    return a, pair[1]


class ReplayGate(PairedGate):
    """A paired gate whose pairs come from recordings and whose clock is the pairs' recorded cost."""

    def __init__(self, run_alpha: float, judged_cases: int, fail_on_improvement: bool = False,
                 rule: SequentialRule | None = None, canary_adjust: bool = False, two_stage: bool = False) -> None:
        self.rule = rule or SequentialRule()
        self.canary_adjust = canary_adjust
        self.redraw_every, self.kept_worlds_note = 0, None  # recorded pairs: no worlds to redraw
        self.alpha = DEFAULT_ALPHA
        self.run_rule = RunLevelRule(run_alpha, judged_cases, two_stage)
        self.settings = cast(Any, SimpleNamespace(fail_on_improvement=fail_on_improvement))
        self.launch = cast(Any, SimpleNamespace(label="REF (replayed)", repo_root=Path(".")))
        self.tree = cast(Any, SimpleNamespace(commit="replayed0000"))
        self.on_pair = None
        self.one_rank_throughput = {}
        self.first_stage_p = []
        self.judgements = []
        self.clock = 0.0
        self._source: Iterator[Pair] = iter(())
        self._cost = 0.0
        self._figures: dict[str, tuple[str, Direction]] = {}
        self._slowdown = 0.0

    def _now(self) -> float:
        return self.clock

    def _pair(self, item: JudgedItem, plan: BlockPlan, stage: Stage, timed: Sequence[Timed],
              fresh_world: bool = False) -> dict[str, Any]:
        a, b = slowed(next(self._source), self._figures, self._slowdown)
        self.clock += self._cost
        stage.a_first.append(True)
        stage.canary_a.append(a.get(CANARY, math.nan))
        stage.canary_b.append(b.get(CANARY, math.nan))
        for t in timed:
            stage.a.setdefault(t.name, []).append(a.get(t.name, math.nan))
            stage.b.setdefault(t.name, []).append(b.get(t.name, math.nan))
        return {"a": {}, "b": {}}

    def replay_case(self, case: RecordedCase, rng: random.Random, slowdown: float = 0.0,
                    block: int = 3) -> list[Verdict]:
        """One replayed night of ``case`` (A ``slowdown`` worse than B): its verdicts on the tested figures."""
        self._source = resampled(case, rng, block)
        self._cost = sum(case.seconds_per_pair) / len(case.seconds_per_pair)
        self._figures, self._slowdown = case.figures, slowdown
        item = JudgedItem(case.nodeid, Path(case.nodeid.split("::")[0]), 0.0, pair_budget_s=case.budget_s)
        judgement = CaseJudgement(case.nodeid)
        judgement.budget_s = case.budget_s
        self.judgements.append(judgement)  # as the live gate keeps them: stages, notes
        directed = {name: MetricResult(name, unit, better, [math.nan]) for name, (unit, better) in case.figures.items()}
        timed = [Timed(name, better, unit) for name, (unit, better) in case.figures.items()]
        return self._decide(item, directed, timed, BlockPlan(0, 0), case.threshold_pct, [], self._now(), judgement)


@dataclass(frozen=True)
class NightOutcome:
    """What one replayed night gave: the cases that failed, the verdict on the slowed case, what its pairs cost
    (each case's recorded seconds per pair, so a lower threshold's longer stages show as a longer night) and
    how many figures ended unsettled (the pair budget spent before their interval was clear)."""

    red_cases: tuple[str, ...]
    slowed_kind: str | None
    pair_seconds: float = 0.0
    unsettled: int = 0


def replay_night(cases: Sequence[RecordedCase], rng: random.Random, run_alpha: float,
                 slowed_case: str | None = None, slowdown: float = 0.0, block: int = 3,
                 fail_on_improvement: bool = False, canary_adjust: bool = False,
                 rule: SequentialRule | None = None, two_stage: bool = False) -> NightOutcome:
    """Every case once, in order, through one :class:`ReplayGate`; ``slowed_case`` made ``slowdown`` worse;
    ``canary_adjust``: estimates adjusted for the recorded canary (pairs without one are not adjusted);
    ``rule``: how many pairs a stage takes (default the gate's); ``two_stage``: confirm at the level that counts
    the first stage's too (:attr:`RunLevelRule.two_stage`)."""
    gate = ReplayGate(run_alpha, len(cases), fail_on_improvement, rule, canary_adjust=canary_adjust,
                      two_stage=two_stage)
    red: list[str] = []
    slowed_kind: str | None = None
    unsettled = 0
    for case in cases:
        verdicts = gate.replay_case(case, rng, slowdown if case.nodeid == slowed_case else 0.0, block)
        unsettled += sum(1 for v in verdicts if v.inconclusive_cause == "unsettled")
        if any(fails(v, fail_on_improvement) for v in verdicts):
            red.append(case.nodeid)
        if case.nodeid == slowed_case:
            kinds = {v.kind for v in verdicts}
            slowed_kind = "regression" if "regression" in kinds else ("unchanged" if kinds == {"unchanged"}
                                                                       else "inconclusive")
    return NightOutcome(tuple(red), slowed_kind, gate.clock, unsettled)


def recorded_pair_seconds(cases: Sequence[RecordedCase]) -> float:
    """What the recorded runs spent on pairs, per run: each case's seconds, averaged over its runs, summed."""
    return sum(sum(spp * len(run) for spp, run in zip(c.seconds_per_pair, c.runs, strict=True)) / len(c.runs)
               for c in cases if c.runs)
