"""The paired gate: interleave A's (working tree) and B's (REF) blocks of every case and judge the pairs.

Per case, after its ordinary run on the working tree (a short calibration run,
:data:`~pytest_dmlbench.measure.rounds.CALIBRATION_BUDGET`, which checks the case and sizes the blocks):
a short warm-up block of B, then block pairs, A and B in an order drawn at random for each pair, until every
judged metric is clear, the cap is reached (:class:`~pytest_dmlbench.gates.paired.statistics.SequentialRule`) or
the case's pair budget is spent. A metric flagged in that stage is measured again in a second, independent
stage and fails the item only when that stage flags it too.

Every figure a block records is judged on block pairs, one-reading figures included (each block re-runs the
body, so each block reads them again): times and rates on their ratio, fractions on their difference in
percentage points. Figures recorded in the pytest process (``dmlbench_metrics``, ``framework: ray_train``
experiments) are re-measured the same way, one whole call of the test function per block on each side.
A scaling case's ``speedup`` and ``scaling_efficiency`` are computed per block from its throughput and its
side's one-rank throughput, and judged on those pairs. Single-reading figures (bytes per step, peak memory)
are compared directly. What cannot be tested (too few
usable pairs, the per-case pair budget spent before the result was clear or confirmed, a REF too old to
re-measure in-process figures) is ``inconclusive``, with the reason. A confirmed timing regression is
explained: one profiled block of each side, compared by operator (``gates/profile_diff.py``).
"""

from __future__ import annotations

import math
import random
import shlex
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import pytest

from pytest_dmlbench.config import DmlbenchConfig
from pytest_dmlbench.errors import RefError
from pytest_dmlbench.gates.figures import SINGLE_READING_METRICS
from pytest_dmlbench.gates.gate import GateDecision, JudgedItem
from pytest_dmlbench.gates.paired.canary_adjustment import adjusted_estimate, canary_logs
from pytest_dmlbench.gates.paired.client import RefLaunch, RefProcess
from pytest_dmlbench.gates.paired.one_reading import one_reading_groups, same_reading
from pytest_dmlbench.gates.paired.plan import BlockPlan, block_plan, case_key
from pytest_dmlbench.gates.paired.protocol import BlockAnswer
from pytest_dmlbench.gates.paired.statistics import (
    PairedEstimate,
    Scale,
    SequentialRule,
    SingleReading,
    block_median,
    chance_apart,
    difference_of,
    estimate,
    in_points,
    is_clear,
    judge,
    pair_values,
    scale_for,
)
from pytest_dmlbench.gates.paired.worktree import Worktree
from pytest_dmlbench.gates.profile_diff import grown, growth_text
from pytest_dmlbench.gates.run_level import WATCH_FDR, RunLevelRule, benjamini_hochberg
from pytest_dmlbench.gates.wording import Decision, detectable_text, word
from pytest_dmlbench.measure.canary import bracket, read_canary
from pytest_dmlbench.measure.op_profile import BlockProfile
from pytest_dmlbench.results import CaseResult, Direction, InconclusiveCause, MetricResult, Verdict, VerdictKind
from pytest_dmlbench.results.stats import median
from pytest_dmlbench.results.student_t import DEFAULT_ALPHA


@dataclass
class Stage:
    """Block medians of one stage, per metric, A and B side by side (one entry per pair), and the canary read
    beside each block (``measure/canary.py``); ``adjust``: estimates are adjusted for the canary."""

    a: dict[str, list[float]] = field(default_factory=dict)
    b: dict[str, list[float]] = field(default_factory=dict)
    a_first: list[bool] = field(default_factory=list)
    canary_a: list[float] = field(default_factory=list)
    canary_b: list[float] = field(default_factory=list)
    fresh_world: list[bool] = field(default_factory=list)  # per pair: both blocks ran on newly started worlds
    adjust: bool = False

    @property
    def pairs(self) -> int:
        return len(self.a_first)

    def usable(self, name: str, scale: Scale) -> bool:
        """Whether every pair of ``name`` has a ratio (positive medians) or a difference (finite ones)."""
        values = self.a.get(name, []) + self.b.get(name, [])
        if not values or not all(math.isfinite(v) for v in values):
            return False
        return scale == "points" or all(v > 0 for v in values)

    def estimate(self, name: str, better: Direction, scale: Scale, alpha: float) -> PairedEstimate | None:
        """The paired estimate of ``name``: adjusted for the canary when ``adjust`` is set and the adjustment
        applies (a ratio, every pair usable, every canary read, enough pairs), else the plain one."""
        values, dropped = pair_values(self.a[name], self.b[name], better, scale)
        if self.adjust and scale == "ratio" and not dropped:
            canary = canary_logs(self.canary_a, self.canary_b)
            adjusted = None if canary is None else adjusted_estimate(values, canary, alpha)
            if adjusted is not None:
                return adjusted
        return estimate(values, alpha, scale)

    def record(self) -> dict[str, Any]:
        """The stage's raw evidence for the results file: per pair, which side ran first, per metric A's and
        B's block medians, the canary beside each side's block (so a decision can be replayed, or re-made
        with another rule, with or without the canary adjustment), and, when worlds were redrawn, which pairs
        ran on fresh ones."""
        record = {"a_first": list(self.a_first), "a": {k: list(v) for k, v in self.a.items()},
                  "b": {k: list(v) for k, v in self.b.items()},
                  "canary": {"a": list(self.canary_a), "b": list(self.canary_b)}}
        if any(self.fresh_world):
            record["fresh_world"] = list(self.fresh_world)
        return record


class BlockFailed(Exception):
    """A block did not pass on one side; the message says which and why."""


@dataclass
class CaseJudgement:
    """Everything the gate found for one case (kept for the summary and the results JSON)."""

    nodeid: str
    verdicts: list[Verdict] = field(default_factory=list)
    stages: list[int] = field(default_factory=list)  # pairs per stage
    block_medians: list[dict[str, Any]] = field(default_factory=list)  # per stage: A's and B's, for replay
    plan: BlockPlan | None = None
    notes: list[str] = field(default_factory=list)
    seconds: float = 0.0
    budget_s: float = 0.0
    budget_spent: bool = False
    profile: dict[str, Any] | None = None  # a confirmed regression's profiled blocks (gates/profile_diff.py)


@dataclass(frozen=True)
class Timed:
    """A figure judged on block pairs: its direction, unit and comparison scale."""

    name: str
    better: Direction
    unit: str

    @property
    def scale(self) -> Scale:
        return scale_for(self.unit)


@dataclass(frozen=True)
class OneRankBase:
    """A one-rank scaling variant's throughput as judged: the base of its family's speedups."""

    estimate: PairedEstimate  # A against B, bad direction
    a: float  # A's block median
    b: float  # B's block median
    budget_spent: bool


class PairedGate:
    """A's side; registered as a pytest plugin for its lifecycle (start B, wait for its cases, summary)."""

    def __init__(self, settings: DmlbenchConfig, launch: RefLaunch, tree: Worktree, own: RefLaunch,
                 rule: SequentialRule | None = None, alpha: float = DEFAULT_ALPHA) -> None:
        self.settings = settings
        self.launch = launch
        self.tree = tree
        self.rule = rule or SequentialRule(futility=settings.futility)
        self.alpha = alpha
        self.budget_s = settings.pair_budget_s
        self.canary_adjust = settings.canary_adjust
        self.redraw_every = 0  # pairs between fresh worlds, once both servers said they can (ready); 0: kept
        self.kept_worlds_note: str | None = None  # why worlds are kept although redrawn ones were asked for
        self.ref = RefProcess(launch)
        self.own = RefProcess(own)  # A's blocks: the working tree's cases in a server like B's
        self.own_cases: dict[str, str] = {}  # case key -> node id in A's block server
        self.ref_cases: dict[str, str] = {}  # case key -> B's node id
        self.a_cases: dict[str, str] = {}  # case key -> A's node id
        self.judgements: list[CaseJudgement] = []
        self.rng = random.Random()
        self.run_rule = RunLevelRule(settings.run_alpha, 1)  # counted again at collection
        self.first_stage_p: list[tuple[str, str, float]] = []  # (node id, metric, p worse): the watch list's input
        self.one_rank_throughput: dict[str, OneRankBase] = {}  # scaling family -> its one-rank variant's
        self.on_pair: Callable[[str, int], None] | None = None  # told (node id, pairs so far) after each pair

    @property
    def against(self) -> str:
        return f"REF {self.launch.label}"

    # -- lifecycle --
    def collected(self, items: Sequence[tuple[str, Path]], measuring: int) -> None:
        """A's cases (node id, file), before A's worlds start: B starts now, so both start together."""
        self.run_rule = RunLevelRule(self.settings.run_alpha, measuring)
        self.a_cases = {case_key(nodeid, path, self.launch.repo_root): nodeid for nodeid, path in items}
        if self.a_cases:
            self.ref.start()
            self.own.start()

    def ready(self) -> None:
        """After A's worlds started: wait for B's announcement of its cases."""
        if not self.a_cases:
            return
        try:
            hello = self.ref.wait_hello()
            own_hello = self.own.wait_hello()
        except RefError as exc:
            raise pytest.UsageError(str(exc)) from None
        self.ref_cases = {case_key(c["nodeid"], Path(c["file"]), self.launch.worktree): c["nodeid"]
                          for c in hello["cases"]}
        self.own_cases = {case_key(c["nodeid"], Path(c["file"]), self.launch.repo_root): c["nodeid"]
                          for c in own_hello["cases"]}
        self.redraw_every, self.kept_worlds_note = self._redraw_interval(self.settings.redraw_worlds)

    def close(self) -> None:
        self.ref.close()
        self.own.close()

    def summary_lines(self) -> list[str]:
        """REF, each case's verdicts in one line, the cases on one side only."""
        if not self.a_cases or self.ref.hello is None:
            return []
        hello = self.ref.hello
        lines = [f"REF {self.launch.label}: worktree {self.tree.path}, pytest-dmlbench "
                 f"{hello.get('plugin_version', '?')} from {hello.get('plugin_file', '?')}"]
        for judgement in self.judgements:
            parts = [f"{v.metric} {v.kind}" + (f" {v.change}" if v.change else "") for v in judgement.verdicts]
            stages = "+".join(str(n) for n in judgement.stages) or "0"
            notes = f" ({'; '.join(judgement.notes)})" if judgement.notes else ""
            plan = judgement.plan
            size = "no blocks" if plan is None else f"blocks of {plan.rounds} rounds x {plan.iterations} call(s)"
            lines.append(f"{judgement.nodeid}: {', '.join(parts) or 'no figures'}; block pairs {stages}, "
                         f"{size}, {judgement.seconds:.1f} s{notes}")
        removed = sorted(nodeid for key, nodeid in self.ref_cases.items() if key not in self.a_cases)
        if removed:
            lines.append(f"removed: {len(removed)} case(s) REF has and the working tree does not:")
            lines.extend(f"  {nodeid}" for nodeid in removed)
        pairs = [sum(j.stages) for j in self.judgements if j.stages]
        if pairs:
            lines.append(f"block pairs per case: median {median(pairs):g}, min {min(pairs)}, max {max(pairs)}")
        return lines + self.watch_lines()

    # -- one case --
    def judge(self, item: JudgedItem, result: CaseResult) -> GateDecision:
        judgement = CaseJudgement(item.nodeid)
        self.judgements.append(judgement)
        begin = self._now()
        problem = None
        try:
            self._revive(judgement)
            self._judge(item, result, judgement, begin)
        except BlockFailed as exc:
            judgement.notes.append(str(exc).splitlines()[0])
            problem = str(exc)
        except RefError as exc:
            judgement.notes.append("REF stopped serving blocks")
            problem = str(exc)
        judgement.seconds = self._now() - begin
        plan = judgement.plan or BlockPlan(0, 0)
        extra = {"paired": {
            "ref": self.launch.label, "commit": self.tree.commit, "block_rounds": plan.rounds,
            "block_iterations": plan.iterations, "block_warmup": self.settings.block_warmup,
            "redraw_worlds": self.redraw_every, "mmap_threshold": self.settings.mmap_threshold,
            "rank_allocator": self.settings.rank_allocator,
            "pairs_per_stage": judgement.stages, "notes": judgement.notes,
            "seconds": judgement.seconds, "budget_s": judgement.budget_s, "budget_spent": judgement.budget_spent,
            "block_medians": judgement.block_medians,
        }}
        if judgement.profile is not None:
            extra["paired"]["profile"] = judgement.profile
        return GateDecision(list(judgement.verdicts), extra=extra, problem=problem)

    def _revive(self, judgement: CaseJudgement) -> None:
        """Restart a block server that stopped during an earlier case (a block that hung past its timeout
        or crashed it), so that one case cannot end the run's comparisons: at most
        :data:`MAX_SERVER_RESTARTS` times per server and run, after which its cases fail as before."""
        for server in (self.ref, self.own):
            if server.stopped and server.restarts < MAX_SERVER_RESTARTS:
                server.restart()
                judgement.notes.append(f"{server.launch.speaker} restarted after it stopped serving "
                                       f"({server.restarts} of {MAX_SERVER_RESTARTS})")

    def _threshold(self, case: CaseResult) -> float:
        return self.settings.threshold_pct if case.threshold_pct is None else case.threshold_pct

    def reproduce(self, item: JudgedItem) -> str:
        return " ".join(["pytest --dmlbench", *item.run_options, "--dmlbench-against", self.tree.commit[:12],
                         shlex.quote(item.nodeid)])

    def _decision(self, item: JudgedItem, metric: MetricResult, kind: VerdictKind, reference: float | None,
                  current: float | None, threshold: float, evidence: str, **more: Any) -> Verdict:
        assert metric.better is not None
        remedy = f"Reproduce: {self.reproduce(item)}" if kind == "regression" else ""
        return word(Decision(metric.name, kind, metric.unit, metric.better, reference, current, threshold,
                             self.against, evidence, remedy=remedy, **more))

    def _judge(self, item: JudgedItem, case: CaseResult, judgement: CaseJudgement, begin: float) -> None:
        threshold = self._threshold(case)
        directed = {n: m for n, m in case.metrics.items() if m.better is not None}
        if item.in_process and not self.ref.offers("in_process_blocks"):
            judgement.notes.append("in-process figures: REF cannot re-measure them")
            version = self.ref.plugin_version
            judgement.verdicts = [self._decision(
                item, m, "inconclusive", None, median(m.samples), threshold,
                f"recorded in the pytest process, and REF's pytest-dmlbench ({version}) predates re-measuring "
                "such figures in blocks; they are judged once REF holds a pytest-dmlbench that does")
                for m in directed.values()]
            return
        if case_key(item.nodeid, item.path, self.launch.repo_root) not in self.ref_cases:
            judgement.notes.append("new: not in REF")
            judgement.verdicts = [self._decision(item, m, "new", None, median(m.samples), threshold,
                                                 f"REF {self.launch.label} has no {item.nodeid}")
                                  for m in directed.values()]
            return
        plan = block_plan(case, self.settings.block_seconds)
        judgement.plan = plan
        redraw = self.redraw_every > 0
        if self.kept_worlds_note is not None:
            judgement.notes.append(self.kept_worlds_note)
        # B's warm-up: discarded, tells which metrics B records (a case starts on fresh worlds when they are redrawn)
        warm = self._ref_block(item, plan.warm_up(), fresh_world=redraw)
        self._own_block(item, plan.warm_up(), fresh_world=redraw)  # A's, discarded: both sides ran the same work
        changed_unit = {n for n, m in directed.items() if n in warm and warm[n].get("unit") != m.unit}
        timed = [Timed(n, m.better, m.unit) for n, m in directed.items()
                 if n not in SINGLE_READING_METRICS and m.better is not None and n in warm and n not in changed_unit]
        readings: list[dict[str, Any]] = []
        judgement.budget_s = self.budget_s if item.pair_budget_s is None else item.pair_budget_s
        verdicts = self._decide(item, directed, timed, plan, threshold, readings, begin, judgement)
        derived = [v for v in verdicts if v.metric in DERIVED_METRICS]
        missing = [n for n in directed if n not in SINGLE_READING_METRICS and n not in warm
                   and n not in {v.metric for v in derived}]
        verdicts += [self._decision(item, directed[n], "inconclusive" if n in DERIVED_METRICS else "new", None,
                                    median(directed[n].samples), threshold, _missing_reason(n, self.launch.label))
                     for n in missing]
        verdicts += [self._decision(item, directed[n], "inconclusive", None, median(directed[n].samples), threshold,
                                    f"the unit changed from {warm[n].get('unit')!r} (REF) to {directed[n].unit!r}: "
                                    "the figures are not comparable") for n in sorted(changed_unit)]
        verdicts += self._single_verdicts(item, {n: m for n, m in directed.items() if n not in changed_unit},
                                          readings, threshold)
        judgement.verdicts = verdicts
        timed_names = {t.name for t in timed} | DERIVED_METRICS
        if any(v.kind == "regression" and v.metric in timed_names for v in verdicts):
            explanation = self._explain(item, plan, judgement)
            judgement.verdicts = [replace(v, message=f"{v.message}\n{explanation}")
                                  if v.kind == "regression" and v.metric in timed_names else v for v in verdicts]

    def _explain(self, item: JudgedItem, plan: BlockPlan, judgement: CaseJudgement) -> str:
        """Where a confirmed regression's time went: one profiled block of each side, in a random order,
        compared by operator (:mod:`pytest_dmlbench.gates.profile_diff`); why not, when it cannot be said."""
        if not self.ref.offers("profiles_blocks"):
            version = self.ref.plugin_version
            return (f"Where the time grew: not profiled, REF's pytest-dmlbench ({version}) predates profiled "
                    "blocks")
        try:
            if self.rng.random() < 0.5:
                a, b = self._own_answer(item, plan, profile=True), self._ref_answer(item, plan, profile=True)
            else:
                b = self._ref_answer(item, plan, profile=True)
                a = self._own_answer(item, plan, profile=True)
            a_profile, b_profile = BlockProfile.from_dict(a["profile"]), BlockProfile.from_dict(b["profile"])
        except BlockFailed as exc:
            judgement.notes.append("profiled blocks failed")
            return f"Where the time grew: not profiled, a profiled block failed: {str(exc).splitlines()[0]}"
        except (KeyError, ValueError) as exc:
            judgement.notes.append("profiled blocks unreadable")
            return f"Where the time grew: not profiled, a block server sent no readable profile ({exc})"
        rows = grown(a_profile, b_profile)
        judgement.profile = {"a": a_profile.to_dict(), "b": b_profile.to_dict(),
                             "grown": [r.to_dict() for r in rows]}
        return growth_text(a_profile, b_profile, rows)

    def _decide(self, item: JudgedItem, directed: dict[str, MetricResult], timed: Sequence[Timed], plan: BlockPlan,
                threshold: float, readings: list[dict[str, Any]], begin: float,
                judgement: CaseJudgement) -> list[Verdict]:
        """The decision on the figures tested on block pairs (and the derived ones): the first stage, the
        confirmation of what it flagged at the run-level share of alpha, the verdicts. Pairs come from
        :meth:`_pair` (blocks on both servers; recorded pairs when a night is replayed, ``gates/replay.py``)."""
        first = self._run_stage(item, plan, timed, threshold, readings, begin, judgement, self.alpha)
        judgement.stages.append(first.pairs)
        judgement.block_medians.append(first.record())
        self._note_first_stage(item, first, timed)
        # the level a figure is confirmed at: the run's alpha split over its cases and this case's distinct tests
        # (figures that are one reading in every first-stage pair count once: gates/paired/one_reading.py)
        groups = one_reading_groups([t.name for t in timed], {t.name: v for t in timed
                                                                if (v := _pair_values(first, t)) is not None})
        represented_by = {name: group[0] for group in groups for name in group[1:]}
        figure_alpha = self.run_rule.figure_alpha(len(groups) + sum(1 for n in DERIVED_METRICS if n in directed))
        kinds = {t.name: self._kind(first, t, threshold) for t in timed}
        # every change is confirmed, failing or not: a reported improvement rests on the same evidence as a
        # regression (one stage of 4 pairs printed +16 % "improvements" on unchanged code in a whole night)
        flagged = [t for t in timed if kinds[t.name] in CHANGED]
        confirm: Stage | None = None
        if flagged and self.rule.confirm:
            # the confirmation's pairs are on a budget of their own: a first stage that spent the case's budget
            # left a shared one the 4-pair minimum, where the run-level share of alpha needs a t of about 40
            confirm = self._run_stage(item, plan, flagged, threshold, readings, self._now(), judgement,
                                      figure_alpha, confirming=True)
            judgement.stages.append(confirm.pairs)
            judgement.block_medians.append(confirm.record())
        by_name = {t.name: t for t in timed}
        decided: dict[str, Verdict] = {}  # a group's representative comes first in the case's order
        for t in timed:
            by = represented_by.get(t.name)
            verdict = self._timed_verdict(item, directed[t.name], t, kinds[t.name], first,
                                          confirm if t in flagged else None, threshold, judgement, figure_alpha,
                                          by)
            if by is not None:
                verdict = self._one_test_with(item, directed[t.name], verdict, t, decided[by], by_name[by],
                                              confirm if t in flagged else None, threshold)
            decided[t.name] = verdict
        verdicts = list(decided.values())
        throughput_stage = confirm if confirm is not None and any(t.name == THROUGHPUT for t in flagged) else first
        derived = self._derived_verdicts(item, directed, first, throughput_stage, threshold, judgement, figure_alpha)
        verdicts += derived
        self._remember_one_rank_throughput(item, first, throughput_stage, judgement)
        return verdicts

    def _derived_verdicts(self, item: JudgedItem, directed: dict[str, MetricResult], first: Stage,
                          decisive: Stage, threshold: float, judgement: CaseJudgement,
                          figure_alpha: float) -> list[Verdict]:
        """``speedup`` and ``scaling_efficiency`` of a scaling variant: the quotient of two paired figures (this
        case's throughput over its one-rank variant's, judged before it in this run), tested on the two
        estimates together (:func:`difference_of`); none when the base or this case's throughput is missing."""
        base = self.one_rank_throughput.get(item.scaling_family or "")
        names = [n for n in ("speedup", "scaling_efficiency") if n in directed]
        if base is None or item.scaling_world_size < 2 or not names or not decisive.usable(THROUGHPUT, "ratio"):
            return []
        own = decisive.estimate(THROUGHPUT, "higher", "ratio", figure_alpha)
        if own is None:
            return []
        a_median, b_median = _throughput_medians(first, decisive)
        speedup_a, speedup_b = a_median / base.a, b_median / base.b
        est = difference_of(own, base.estimate, figure_alpha)  # one stage, judged at the run-level share
        size = float(item.scaling_world_size)
        verdicts = []
        for name in names:
            metric = directed[name]
            shown = est if name == "speedup" else in_points(est, speedup_b / size)
            a_value, b_value = (speedup_a, speedup_b) if name == "speedup" else (speedup_a / size, speedup_b / size)
            kind: VerdictKind = judge(shown, threshold)
            evidence = (f"{_estimate_text(shown, metric.unit)}, from this case's throughput over {decisive.pairs} "
                        f"block pairs and its one-rank variant's over {base.estimate.pairs} (the two intervals "
                        f"combined, Welch), alpha {shown.alpha:g}")
            if kind == "unchanged" and not is_clear(shown, threshold) and (judgement.budget_spent or base.budget_spent):
                kind = "inconclusive"
                evidence += ("; a pair budget was spent before the combined interval was clear of the threshold "
                             "(--dmlbench-pair-budget, or the case's pair_budget=, raises it)")
            p = shown.p_better if kind == "improvement" else shown.p_worse
            verdicts.append(self._decision(item, metric, kind, b_value, a_value, threshold, evidence, p_value=p,
                                           detectable_pct=shown.detectable_pct(), runs=decisive.pairs,
                                           cause="unsettled" if kind == "inconclusive" else None,
                                           paired=shown.evidence("first" if decisive is first else "confirmation")))
        return verdicts

    def _note_first_stage(self, item: JudgedItem, first: Stage, timed: Sequence[Timed]) -> None:
        """Each tested figure's first-stage p-value (A worse), the input of the end-of-run watch list."""
        for t in timed:
            est = first.estimate(t.name, t.better, t.scale, self.alpha) if first.usable(t.name, t.scale) else None
            if est is not None:
                self.first_stage_p.append((item.nodeid, t.name, est.p_worse))

    def watch_lines(self) -> list[str]:
        """The run-level rule's statement and the Benjamini-Hochberg watch list (shown, never failing)."""
        lines = [self.run_rule.statement()]
        found = benjamini_hochberg([p for _, _, p in self.first_stage_p], WATCH_FDR)
        if found:
            lines.append(f"watch list (first-stage p-values, Benjamini-Hochberg at a {100 * WATCH_FDR:g} % false "
                         f"discovery rate over {len(self.first_stage_p)} tested figures; shown, not failing):")
            lines.extend(f"  {self.first_stage_p[i][0]} {self.first_stage_p[i][1]} p={self.first_stage_p[i][2]:.2g}"
                         for i in found)
        return lines

    def _remember_one_rank_throughput(self, item: JudgedItem, first: Stage, decisive: Stage,
                                      judgement: CaseJudgement) -> None:
        """A one-rank scaling variant's judged throughput, the base of its family's speedups."""
        if item.scaling_family is None or item.scaling_world_size != 1 or not decisive.usable(THROUGHPUT, "ratio"):
            return
        est = decisive.estimate(THROUGHPUT, "higher", "ratio", self.alpha)
        if est is None:
            return
        self.one_rank_throughput[item.scaling_family] = OneRankBase(est, *_throughput_medians(first, decisive),
                                                                    judgement.budget_spent)

    def _redraw_interval(self, asked: int) -> tuple[int, str | None]:
        """The pairs between fresh worlds (0: worlds kept), from ``asked`` and both servers' hellos; when a
        server cannot start fresh worlds, 0 and a note naming it and its version."""
        unable = [server for server in (self.ref, self.own) if not server.offers("redraws_worlds")]
        if asked == 0 or not unable:
            return asked, None
        return 0, (f"worlds kept, not redrawn: {unable[0].launch.speaker} (pytest-dmlbench "
                   f"{unable[0].plugin_version}) cannot start fresh ones for its blocks")

    def _ref_block(self, item: JudgedItem, plan: BlockPlan, fresh_world: bool = False) -> dict[str, Any]:
        return dict(self._ref_answer(item, plan, fresh_world=fresh_world)["metrics"])

    def _ref_answer(self, item: JudgedItem, plan: BlockPlan, profile: bool = False,
                    fresh_world: bool = False) -> BlockAnswer:
        ref_nodeid = self.ref_cases[case_key(item.nodeid, item.path, self.launch.repo_root)]
        answer = self.ref.block(ref_nodeid, plan.rounds, self.settings.block_warmup, plan.iterations,
                                item.timeout_s + 60.0, profile=profile, fresh_world=fresh_world)
        if answer["status"] != "passed":
            raise BlockFailed(f"{item.nodeid}: not compared with REF {self.launch.label}: the case "
                              f"{answer['status']} there.\n{answer['message']}")
        return answer

    def _own_block(self, item: JudgedItem, plan: BlockPlan, fresh_world: bool = False) -> dict[str, Any]:
        return dict(self._own_answer(item, plan, fresh_world=fresh_world)["metrics"])

    def _own_answer(self, item: JudgedItem, plan: BlockPlan, profile: bool = False,
                    fresh_world: bool = False) -> BlockAnswer:
        """A block of the working tree's case, in A's block server (never in this session's worlds)."""
        # beside a REF whose experiments train in full in every block, A's do too, so both measure the same work
        whole = not self.ref.offers("budgeted_experiments")
        own_nodeid = self.own_cases.get(case_key(item.nodeid, item.path, self.launch.repo_root))
        if own_nodeid is None:
            raise BlockFailed(f"{item.nodeid}: {self.own.launch.speaker} did not collect this case, so its "
                              f"blocks cannot run; its pytest output is in {self.own.named_log()}")
        answer = self.own.block(own_nodeid, plan.rounds, self.settings.block_warmup, plan.iterations,
                                item.timeout_s + 60.0, whole_experiment=whole, profile=profile,
                                fresh_world=fresh_world)
        if answer["status"] != "passed":
            raise BlockFailed(f"{item.nodeid}: a block of the working tree's case {answer['status']} after its "
                              f"ordinary run passed.\n{answer['message']}")
        return answer

    def _now(self) -> float:
        """The clock the pair budget is spent on (a replayed night advances its own)."""
        return time.monotonic()

    def _pair(self, item: JudgedItem, plan: BlockPlan, stage: Stage, timed: Sequence[Timed],
              fresh_world: bool = False) -> dict[str, Any]:
        a_first = self.rng.random() < 0.5
        if a_first:
            a, canary_a = _beside_canary(lambda: self._own_block(item, plan, fresh_world))
            b, canary_b = _beside_canary(lambda: self._ref_block(item, plan, fresh_world))
        else:
            b, canary_b = _beside_canary(lambda: self._ref_block(item, plan, fresh_world))
            a, canary_a = _beside_canary(lambda: self._own_block(item, plan, fresh_world))
        stage.a_first.append(a_first)
        stage.fresh_world.append(fresh_world)
        stage.canary_a.append(canary_a)
        stage.canary_b.append(canary_b)
        for t in timed:
            stage.a.setdefault(t.name, []).append(block_median(a.get(t.name, {}).get("samples", []), t.scale))
            stage.b.setdefault(t.name, []).append(block_median(b.get(t.name, {}).get("samples", []), t.scale))
        return {"a": a, "b": b}

    def _run_stage(self, item: JudgedItem, plan: BlockPlan, timed: Sequence[Timed], threshold: float,
                   readings: list[dict[str, Any]], begin: float, judgement: CaseJudgement, alpha: float,
                   confirming: bool = False) -> Stage:
        """Pairs until every metric is clear, the cap, or the budget (never fewer than the minimum, and at
        least one pair: the single-reading figures are read from the pairs)."""
        stage = Stage(adjust=self.canary_adjust)
        while True:
            active = [t for t in timed if stage.usable(t.name, t.scale)]
            estimates = [stage.estimate(t.name, t.better, t.scale, alpha) for t in active] if stage.pairs else []
            if stage.pairs and not timed:
                return stage
            if self.rule.settled_exactly([stage.a[t.name] + stage.b[t.name] for t in timed if t.name in stage.a],
                                         _single_block_readings(readings[len(readings) - stage.pairs:]),
                                         stage.pairs):
                judgement.notes.append(f"every tested figure read exactly alike in all {2 * stage.pairs} blocks of "
                                       f"a stage of {stage.pairs} pairs, and no single reading set the sides "
                                       "apart: the stage ended before its minimum")
                return stage
            if not self.rule.wants_more(estimates, threshold, stage.pairs, confirming):
                if stage.pairs < self.rule.cap(confirming) and not all(e is not None and is_clear(e, threshold)
                                                                       for e in estimates):
                    judgement.notes.append(f"futility stop after {stage.pairs} pairs: no unclear figure could be "
                                           f"clear by the cap of {self.rule.max_pairs} at its noise")
                return stage
            if stage.pairs >= self.rule.min_pairs and self._now() - begin > judgement.budget_s:
                judgement.budget_spent = True
                which = "the confirmation's " if confirming else ""
                judgement.notes.append(f"{which}pair budget of {judgement.budget_s:g} s spent after {stage.pairs} "
                                       "pairs")
                return stage
            done = sum(judgement.stages) + stage.pairs  # the case's pairs so far, over its stages
            fresh = self.redraw_every > 0 and done > 0 and done % self.redraw_every == 0
            readings.append(self._pair(item, plan, stage, timed, fresh))
            if self.on_pair is not None:
                self.on_pair(item.nodeid, sum(judgement.stages) + stage.pairs)

    def _kind(self, stage: Stage, t: Timed, threshold: float) -> str:
        if not stage.usable(t.name, t.scale):
            return "inconclusive"
        est = stage.estimate(t.name, t.better, t.scale, self.alpha)
        return "inconclusive" if est is None else judge(est, threshold)

    def _timed_verdict(self, item: JudgedItem, metric: MetricResult, t: Timed, kind: Any, first: Stage,
                       confirm: Stage | None, threshold: float, judgement: CaseJudgement,
                       figure_alpha: float, one_test_with: str | None = None) -> Verdict:
        budget_spent = judgement.budget_spent
        a_all = first.a.get(t.name, []) + (confirm.a.get(t.name, []) if confirm else [])
        b_all = first.b.get(t.name, []) + (confirm.b.get(t.name, []) if confirm else [])
        a_med, b_med = median(a_all), median(b_all)
        decisive = confirm if confirm is not None else first
        if not decisive.usable(t.name, t.scale):
            why = ("block medians not all positive, so no ratio exists" if t.scale == "ratio"
                   else "block medians not all finite")
            return self._decision(item, metric, "inconclusive", b_med, a_med, threshold,
                                  f"no paired test over {decisive.pairs} block pairs: {why}")
        # a flagged figure fails only when the confirmation finds it at the run-level share of alpha
        est = decisive.estimate(t.name, t.better, t.scale, figure_alpha if confirm is not None else self.alpha)
        if est is None:
            return self._decision(item, metric, "inconclusive", b_med, a_med, threshold,
                                  f"too few usable block pairs ({decisive.pairs}) for a paired test")
        evidence = _evidence(est, decisive.pairs, metric.unit)
        if confirm is not None:
            first_est = first.estimate(t.name, t.better, t.scale, self.alpha) if first.usable(t.name, t.scale) else None
            evidence += (f"; first stage of {first.pairs} block pairs: "
                         + (_estimate_text(first_est, metric.unit) if first_est else "too few usable pairs")
                         + f", confirmed {'yes' if judge(est, threshold) == kind else 'no'} by the second stage "
                         f"at alpha {figure_alpha:.3g} (the run-level rule)")
            if one_test_with is not None:
                evidence += (f"; counted as one test with {one_test_with}, the same reading in every first-stage "
                             "block pair")
            if judge(est, threshold) != kind:
                kind = "unchanged"  # not confirmed by the independent second stage
        if kind == "unchanged" and budget_spent and not is_clear(est, threshold):
            kind = "inconclusive"
            evidence += (f"; the pair budget of {judgement.budget_s:g} s was spent before the interval was clear of "
                         "the threshold (--dmlbench-pair-budget, or the case's pair_budget=, raises it)")
        p = est.p_better if kind == "improvement" else est.p_worse
        return self._decision(item, metric, kind, b_med, a_med, threshold, evidence, p_value=p,
                              detectable_pct=est.detectable_pct(), runs=decisive.pairs,
                              cause="unsettled" if kind == "inconclusive" else None,
                              paired=est.evidence("first" if confirm is None else "confirmation"))

    def _one_test_with(self, item: JudgedItem, metric: MetricResult, verdict: Verdict, t: Timed,
                       by_verdict: Verdict, by: Timed, confirm: Stage | None, threshold: float) -> Verdict:
        """A figure counted as one test with ``by`` (one reading in every first-stage pair) may change only
        where ``by`` changed the same way and the two still agree in every pair of the confirmation; otherwise
        its change is left unsettled, for its own test was not counted in the run-level split."""
        if verdict.kind not in CHANGED or confirm is None:
            return verdict
        own, theirs = _pair_values(confirm, t), _pair_values(confirm, by)
        agree = own is not None and theirs is not None and same_reading(own, theirs)
        if agree and by_verdict.kind == verdict.kind:
            return verdict
        why = (f"{by.name}, which it read as one with in the first stage, was found {by_verdict.kind}" if agree
               else f"it moved apart from {by.name} in the confirmation's pairs, though the two were one reading in "
               "the first stage's")
        return self._decision(item, metric, "inconclusive", verdict.baseline_median, verdict.current_median,
                              threshold, f"{verdict.kind} in its own test, but {why}; it was counted as one test "
                              f"with {by.name} in the run-level split, so its own test cannot stand at the run's "
                              "level and the change is left unsettled", cause="unsettled")

    def _single_verdicts(self, item: JudgedItem, directed: dict[str, MetricResult],
                         readings: list[dict[str, Any]], threshold: float) -> list[Verdict]:
        verdicts = []
        for name, metric in directed.items():
            if name not in SINGLE_READING_METRICS or metric.better is None:
                continue
            a_vals = [v for r in readings for v in r["a"].get(name, {}).get("samples", [])]
            b_vals = [v for r in readings for v in r["b"].get(name, {}).get("samples", [])]
            if not a_vals or not b_vals:
                side = "the working tree" if not a_vals else f"REF {self.launch.label}"
                verdicts.append(self._decision(item, metric, "inconclusive", median(b_vals) if b_vals else None,
                                               median(a_vals) if a_vals else None, threshold,
                                               f"no block of {side} recorded it"))
                continue
            reading = SingleReading(median(a_vals), median(b_vals), metric.better, threshold)
            finite = math.isfinite(reading.a) and math.isfinite(reading.b)
            kind: VerdictKind = reading.kind() if finite else "inconclusive"
            evidence = (f"a single-reading figure, compared exactly (median over {len(readings)} blocks each side), "
                        "no statistical test")
            if not finite:
                sides = "one side" if math.isfinite(reading.a) or math.isfinite(reading.b) else "both sides"
                evidence = (f"a single-reading figure whose median over {len(readings)} blocks is not finite on "
                            f"{sides}: nothing to compare")
            cause: InconclusiveCause | None = None if finite else "untestable"
            if kind in CHANGED:
                kind, evidence = _apart_or_inconclusive(name, metric.better, kind, reading, readings, self.alpha)
                cause = "unsettled" if kind == "inconclusive" else None  # the order test ran: readings overlap
            verdicts.append(self._decision(item, metric, kind, reading.b, reading.a, threshold, evidence,
                                           detectable_pct=0.0 if kind == "unchanged" else None, cause=cause))
        return verdicts


CHANGED = frozenset({"regression", "improvement"})


def _pair_values(stage: Stage, t: Timed) -> list[float] | None:
    """``t``'s pair values in ``stage`` (A against B in the bad direction), or None where a pair has none."""
    if not stage.usable(t.name, t.scale):
        return None
    values, dropped = pair_values(stage.a[t.name], stage.b[t.name], t.better, t.scale)
    return None if dropped else values


def _beside_canary(block: Callable[[], dict[str, Any]]) -> tuple[dict[str, Any], float]:
    """A block's answer, and the canary read just before and just after it (``measure/canary.py``)."""
    before = read_canary()
    answer = block()
    return answer, bracket(before, read_canary())


def _single_block_readings(readings: Sequence[dict[str, Any]]) -> list[tuple[list[float], list[float]]]:
    """Per single-reading figure the blocks recorded, A's and B's block medians (empty where a side lacks it)."""
    names = sorted({n for r in readings for side in ("a", "b") for n in r[side] if n in SINGLE_READING_METRICS})
    return [([median(r["a"][n]["samples"]) for r in readings if r["a"].get(n, {}).get("samples")],
             [median(r["b"][n]["samples"]) for r in readings if r["b"].get(n, {}).get("samples")]) for n in names]


def _apart_or_inconclusive(name: str, better: Direction, kind: VerdictKind, reading: SingleReading,
                           readings: Sequence[dict[str, Any]], alpha: float = DEFAULT_ALPHA) -> tuple[VerdictKind, str]:
    """A single-reading change beyond the threshold stands when each side read one value in every one of at
    least two blocks (an exact figure, such as bytes per step), or when every block of one side lies beyond
    every block of the other and the chance of that order with no change (:func:`chance_apart`, on each
    block's median) is at most ``alpha``. When the readings overlap, the figure moves from block to block as
    much as between the sides; when they lie apart over too few blocks, the order says little (one block
    a side: a chance of one half). Both are inconclusive."""
    a = [median(r["a"][name]["samples"]) for r in readings if r["a"].get(name, {}).get("samples")]
    b = [median(r["b"][name]["samples"]) for r in readings if r["b"].get(name, {}).get("samples")]
    p = chance_apart(a, b, better, a_worse=kind == "regression")
    moved = f"medians {reading.bad_pct:+.1f} % in the bad direction over {len(a)} and {len(b)} blocks"
    exact = len(a) >= 2 and len(b) >= 2 and len(set(a)) == 1 and len(set(b)) == 1
    if p is not None and not exact and p > alpha:
        return "inconclusive", (
            f"a single-reading figure whose {moved}, beyond the threshold, with every block of one side beyond "
            f"every block of the other; but the chance of that order with no change is {p:.2g} over so few "
            f"blocks, above alpha {alpha:g}, so no change can be told from it (more block pairs would)")
    if p is None:
        return "inconclusive", (
            f"a single-reading figure whose {moved}, beyond the threshold, but the blocks' readings overlap "
            f"(working tree {min(a):.6g} to {max(a):.6g}, REF {min(b):.6g} to {max(b):.6g}): it moves from block "
            "to block as much as between the two sides, so no change can be told from that movement")
    side = "above" if (better == "lower") == (kind == "regression") else "below"
    return kind, (f"a single-reading figure, compared exactly ({moved}); every block of the working tree lies "
                  f"{side} every block of REF (chance {p:.2g} with no change, every order of the readings alike)")
MAX_SERVER_RESTARTS = 2  # per block server and run: a server that keeps dying is a problem to report

# Figures the harness derives across cases (a scaling case's throughput over its one-rank variant's): no
# block records them; they are computed from each block's throughput (:meth:`PairedGate._derived`).
DERIVED_METRICS = frozenset({"speedup", "scaling_efficiency"})
THROUGHPUT = "throughput_samples_per_s"


def _throughput_medians(first: Stage, decisive: Stage) -> tuple[float, float]:
    """A's and B's median throughput over a case's block pairs (the first stage's, and the confirmation's)."""
    a = first.a[THROUGHPUT] + (decisive.a[THROUGHPUT] if decisive is not first else [])
    b = first.b[THROUGHPUT] + (decisive.b[THROUGHPUT] if decisive is not first else [])
    return median(a), median(b)


def _missing_reason(name: str, label: str) -> str:
    if name in DERIVED_METRICS:
        return (f"{name} is derived from this case's throughput and its one-rank variant's, and the one-rank "
                "variant's throughput was not judged on block pairs before it in this run (deselected, not in "
                f"REF {label}, or on another xdist worker), so no block value exists")
    return f"REF {label}'s case does not record {name}: a figure this change adds, judged from the next REF on"


def _estimate_text(est: PairedEstimate, unit: str) -> str:
    low, high = est.ci
    improved = est.mean_log < 0
    p = est.p_better if improved else est.p_worse
    if est.scale == "points":
        return (f"difference {100 * est.mean_log:+.2f} pp [{100 * (1 - 2 * est.alpha):g}% CI "
                f"{100 * est.ci_low_log:+.2f}, {100 * est.ci_high_log:+.2f}] in the bad direction, one-sided "
                f"paired t-test p={p:.3g} (H1: working tree {'better' if improved else 'worse'})")
    return (f"ratio {est.ratio:.3f} [{100 * (1 - 2 * est.alpha):g}% CI {low:.3f}, {high:.3f}] (A/B in the bad "
            f"direction), one-sided paired t-test p={p:.3g} (H1: working tree {'better' if improved else 'worse'})")


def _evidence(est: PairedEstimate, pairs: int, unit: str) -> str:
    return (f"{_estimate_text(est, unit)} over {pairs} block pairs, alpha {est.alpha:g}; per-pair noise "
            f"{detectable_text(est.noise_pct, unit)}")
