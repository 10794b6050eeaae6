"""Replayed nights: the paired gate's own trial (:mod:`.paired.trial`) fed block pairs recorded on this machine.

Each case of a night goes through the same :class:`~pytest_dmlbench.gates.paired.trial.Trial` the live gate
runs (first stage, confirmation at the run-level share of alpha, verdicts), its pairs served by
:func:`~pytest_dmlbench.gates.paired.recorded.recorded_source` (resampled, with an injected slowdown where
asked). Time is replayed too: each pair costs the case's recorded seconds per pair, on one clock for the
night. ``studies/replay_nights.py`` measures the gate's error rates this way.
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from pytest_dmlbench.gates.gate import JudgedItem
from pytest_dmlbench.gates.paired.pairs import PairSource
from pytest_dmlbench.gates.paired.recorded import RecordedCase, recorded_source
from pytest_dmlbench.gates.paired.stage import CaseJudgement
from pytest_dmlbench.gates.paired.statistics import SequentialRule
from pytest_dmlbench.gates.paired.trial import Trial
from pytest_dmlbench.gates.paired.verdict_writer import VerdictWriter
from pytest_dmlbench.gates.run_level import RunLevelRule
from pytest_dmlbench.gates.thresholds import Thresholds
from pytest_dmlbench.gates.wording import fails
from pytest_dmlbench.results import MetricResult, Verdict

REPLAYED = VerdictWriter(label="REF (replayed)", commit="replayed0000")
"""How replayed verdicts name REF: no commit was re-measured."""


class Replay:
    """Cases replayed one after another through one trial, on one clock (the pairs' recorded cost); every
    case's judgement is kept, as the live gate keeps them (stages, notes)."""

    def __init__(self, run_alpha: float, judged_cases: int, rule: SequentialRule | None = None,
                 canary_adjust: bool = False, two_stage: bool = False) -> None:
        self.trial = Trial(REPLAYED, RunLevelRule(run_alpha, judged_cases, two_stage), rule,
                           canary_adjust=canary_adjust)
        self.clock = 0.0
        self.judgements: list[CaseJudgement] = []

    def replay_case(self, case: RecordedCase, rng: random.Random, slowdown: float = 0.0,
                    block: int = 3) -> list[Verdict]:
        """One replayed night of ``case`` (A ``slowdown`` worse than B): its verdicts on the tested figures."""
        source = recorded_source(case, rng, slowdown, block, start=self.clock)
        verdicts = self.run(case, source)
        self.clock = source.now()
        return verdicts

    def run(self, case: RecordedCase, source: PairSource) -> list[Verdict]:
        """``case``'s verdicts on the pairs of ``source`` (whose clock the pair budget is spent on)."""
        item = JudgedItem(case.nodeid, Path(case.nodeid.split("::")[0]), 0.0, pair_budget_s=case.budget_s)
        judgement = CaseJudgement(case.nodeid)
        self.judgements.append(judgement)
        directed = {name: MetricResult(name, unit, better, [math.nan]) for name, (unit, better) in case.figures.items()}
        units = {name: unit for name, (unit, _) in case.figures.items()}
        thresholds = Thresholds(case.threshold_pct, case.cpu_threshold_pct)
        return self.trial.judge_case(item, directed, units, thresholds, source, judgement, source.now())


@dataclass(frozen=True)
class NightOutcome:
    """What one replayed night gave: the cases that failed, the verdict on the slowed case, what its pairs cost
    (each case's recorded seconds per pair, so a lower threshold's longer stages show as a longer night) and
    how many figures were judged, how many settled (found changed, or proven unchanged) and how many ended
    tested but not settled."""

    red_cases: tuple[str, ...]
    slowed_kind: str | None
    pair_seconds: float = 0.0
    unsettled: int = 0
    judged: int = 0
    settled: int = 0


def replay_night(cases: Sequence[RecordedCase], rng: random.Random, run_alpha: float,
                 slowed_case: str | None = None, slowdown: float = 0.0, block: int = 3,
                 fail_on_improvement: bool = False, canary_adjust: bool = False,
                 rule: SequentialRule | None = None, two_stage: bool = False) -> NightOutcome:
    """Every case once, in order, through one :class:`Replay`; ``slowed_case`` made ``slowdown`` worse;
    ``canary_adjust``: estimates adjusted for the recorded canary (pairs without one are not adjusted);
    ``rule``: how many pairs a stage takes (default the gate's); ``two_stage``: confirm at the level that counts
    the first stage's too (:attr:`RunLevelRule.two_stage`)."""
    replay = Replay(run_alpha, len(cases), rule, canary_adjust=canary_adjust, two_stage=two_stage)
    red: list[str] = []
    slowed_kind: str | None = None
    unsettled = judged = settled = 0
    for case in cases:
        verdicts = replay.replay_case(case, rng, slowdown if case.nodeid == slowed_case else 0.0, block)
        unsettled += sum(1 for v in verdicts if v.inconclusive_cause == "unsettled")
        judged += sum(1 for v in verdicts if v.kind != "new")
        settled += sum(1 for v in verdicts if v.kind in ("regression", "improvement", "unchanged"))
        if any(fails(v, fail_on_improvement) for v in verdicts):
            red.append(case.nodeid)
        if case.nodeid == slowed_case:
            kinds = {v.kind for v in verdicts}
            slowed_kind = "regression" if "regression" in kinds else ("unchanged" if kinds == {"unchanged"}
                                                                       else "inconclusive")
    return NightOutcome(tuple(red), slowed_kind, replay.clock, unsettled, judged, settled)


def recorded_pair_seconds(cases: Sequence[RecordedCase]) -> float:
    """What the recorded runs spent on pairs, per run: each case's seconds, averaged over its runs, summed."""
    return sum(sum(spp * len(run) for spp, run in zip(c.seconds_per_pair, c.runs, strict=True)) / len(c.runs)
               for c in cases if c.runs)
