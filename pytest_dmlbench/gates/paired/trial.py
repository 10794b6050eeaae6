"""The paired decision procedure: one case's block pairs, from any source, to its verdicts.

A first stage takes pairs until every judged figure is clear of the threshold, the cap is reached, no unclear
figure could be clear by the cap (the futility stop, :class:`SequentialRule`) or the case's pair budget is
spent. A figure it flags (a regression or an improvement) is measured again in a second, independent stage
and stands only when that stage flags it too, at the run-level share of alpha (:class:`RunLevelRule`; figures
that are one reading in every first-stage pair count once, :mod:`.one_reading`). Timed figures are judged on
their pairs, derived ones (speedup) from two judged throughputs (:mod:`.derived`), single readings (bytes,
peak memory) directly (:mod:`.single_reading`).

The pairs come from a :class:`~pytest_dmlbench.gates.paired.pairs.PairSource`: the live gate's runs blocks on
the two block servers (:mod:`.live_source`), a replayed night's serves recorded pairs (:mod:`.recorded`), and
both go through this same code.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from pytest_dmlbench.gates.figures import is_single_reading
from pytest_dmlbench.gates.gate import JudgedItem
from pytest_dmlbench.gates.paired.derived import (
    DERIVED_METRICS,
    THROUGHPUT,
    OneRankBase,
    derived_verdicts,
    missing_reason,
    throughput_medians,
)
from pytest_dmlbench.gates.paired.memory_peaks import peak_test
from pytest_dmlbench.gates.paired.one_reading import one_reading_groups, same_reading
from pytest_dmlbench.gates.paired.pairs import BlockPair, PairSource
from pytest_dmlbench.gates.paired.settling import unsettled_text
from pytest_dmlbench.gates.paired.single_reading import single_block_readings, single_verdicts, tested_peaks
from pytest_dmlbench.gates.paired.stage import CaseJudgement, Stage, Timed
from pytest_dmlbench.gates.paired.statistics import SequentialRule, is_clear, is_inside, judge
from pytest_dmlbench.gates.paired.verdict_writer import (
    CHANGED,
    VerdictWriter,
    estimate_text,
    evidence_text,
    reconciled_current,
)
from pytest_dmlbench.gates.run_level import WATCH_FDR, RunLevelRule, benjamini_hochberg
from pytest_dmlbench.gates.thresholds import Thresholds
from pytest_dmlbench.results import Direction, MetricResult, Verdict
from pytest_dmlbench.results.stats import median
from pytest_dmlbench.results.student_t import DEFAULT_ALPHA
from pytest_dmlbench.results.units import format_quantity


class Trial:
    """The decision procedure of a run: each case's stages and verdicts, and what the run's cases share (the
    run-level rule, the first-stage p-values of the watch list, the one-rank throughputs of speedups)."""

    def __init__(self, writer: VerdictWriter, run_rule: RunLevelRule, rule: SequentialRule | None = None,
                 alpha: float = DEFAULT_ALPHA, budget_s: float = 60.0, canary_adjust: bool = False) -> None:
        self.writer = writer
        self.run_rule = run_rule
        self.rule = rule or SequentialRule()
        self.alpha = alpha
        self.budget_s = budget_s  # a case's pair budget unless it sets its own
        self.canary_adjust = canary_adjust
        self.redraw_every = 0  # pairs between fresh worlds; 0: worlds kept
        self.first_stage_p: list[tuple[str, str, float]] = []  # (node id, metric, p worse): the watch list's input
        self.one_rank_throughput: dict[str, OneRankBase] = {}  # scaling family -> its one-rank variant's
        self.on_pair: Callable[[str, int], None] | None = None  # told (node id, pairs so far) after each pair

    def judge_case(self, item: JudgedItem, directed: Mapping[str, MetricResult], ref_units: Mapping[str, str | None],
                   threshold: float | Thresholds, source: PairSource, judgement: CaseJudgement,
                   begin: float) -> list[Verdict]:
        """Every verdict on ``directed`` (the figures with a direction) from ``source``'s pairs, each against its
        threshold (``threshold``: one for all, or the case's per figure kind); ``ref_units``: the unit of each
        figure REF's case records (its warm-up block), ``begin``: when the case's budget started on the
        source's clock."""
        thresholds = Thresholds.of_case(threshold)
        changed_unit = {n for n, m in directed.items() if n in ref_units and ref_units[n] != m.unit}
        timed = [Timed(n, m.better, m.unit) for n, m in directed.items() if not is_single_reading(n)
                 and m.better is not None and n in ref_units and n not in changed_unit]
        pairs: list[BlockPair] = []
        judgement.budget_s = self.budget_s if item.pair_budget_s is None else item.pair_budget_s
        verdicts = self.decide(item, directed, timed, thresholds, source, pairs, judgement, begin)
        derived = {v.metric for v in verdicts if v.metric in DERIVED_METRICS}
        missing = [n for n in directed if not is_single_reading(n) and n not in ref_units and n not in derived]
        write = self.writer.write
        verdicts += [write(item, directed[n], "inconclusive" if n in DERIVED_METRICS else "new", None,
                           median(directed[n].samples), thresholds.of(n), missing_reason(n, self.writer.label))
                     for n in missing]
        verdicts += [write(item, directed[n], "inconclusive", None, median(directed[n].samples), thresholds.of(n),
                           f"the unit changed from {ref_units[n]!r} (REF) to {directed[n].unit!r}: the figures "
                           "are not comparable") for n in sorted(changed_unit)]
        return verdicts + single_verdicts(self.writer, item, {n: m for n, m in directed.items()
                                                              if n not in changed_unit}, pairs,
                                          thresholds.default_pct, self.alpha,
                                          judgement.figure_alpha or self.alpha)

    def decide(self, item: JudgedItem, directed: Mapping[str, MetricResult], timed: Sequence[Timed],
               thresholds: Thresholds, source: PairSource, pairs: list[BlockPair], judgement: CaseJudgement,
               begin: float) -> list[Verdict]:
        """The verdicts on the figures tested on block pairs (``timed``) and the derived ones: the first stage,
        the confirmation of what it flagged at the run-level share of alpha. Every pair taken is added to
        ``pairs`` (the single-reading figures are read from them)."""
        # memory peaks are tested on the stage's pairs (at least the minimum of them, even where no timed figure
        # keeps the stage going), and over redrawn worlds settle with more pairs, so the first stage waits for them
        peaks = [(n, directed[n].better or "lower") for n in tested_peaks(directed)]
        first = self._run_stage(item, timed, thresholds, source, pairs, begin, judgement, self.alpha, peaks=peaks)
        judgement.stages.append(first.pairs)
        judgement.block_medians.append(first.record())
        self._note_first_stage(item, first, timed)
        # the level a figure is confirmed at: the run's alpha split over its cases and this case's distinct tests
        # (figures that are one reading in every first-stage pair count once: gates/paired/one_reading.py)
        groups = one_reading_groups([t.name for t in timed], {t.name: v for t in timed
                                                                if (v := first.values(t)) is not None})
        represented_by = {name: group[0] for group in groups for name in group[1:]}
        # every figure tested counts: the timed ones (a one-reading group once), the derived ones and the memory
        # peaks; exact counts are compared exactly and spend none
        figure_alpha = self.run_rule.figure_alpha(len(groups) + sum(1 for n in DERIVED_METRICS if n in directed)
                                                  + len(tested_peaks(directed)))
        judgement.figure_alpha = figure_alpha
        kinds = {t.name: self._kind(first, t, thresholds.of(t.name)) for t in timed}
        # every change is confirmed, failing or not: a reported improvement rests on the same evidence as a
        # regression (one stage of 4 pairs printed +16 % "improvements" on unchanged code in a whole night)
        flagged = [t for t in timed if kinds[t.name] in CHANGED]
        confirm: Stage | None = None
        if flagged and self.rule.confirm:
            # the confirmation's pairs are on a budget of their own: a first stage that spent the case's budget
            # left a shared one the 4-pair minimum, where the run-level share of alpha needs a t of about 40
            confirm = self._run_stage(item, flagged, thresholds, source, pairs, source.now(), judgement,
                                      figure_alpha, confirming=True)
            judgement.stages.append(confirm.pairs)
            judgement.block_medians.append(confirm.record())
        by_name = {t.name: t for t in timed}
        decided: dict[str, Verdict] = {}  # a group's representative comes first in the case's order
        for t in timed:
            by = represented_by.get(t.name)
            confirming = confirm if t in flagged else None
            verdict = self.timed_verdict(item, directed[t.name], t, kinds[t.name], first, confirming,
                                         thresholds.of(t.name), judgement, figure_alpha, by)
            if by is not None:
                verdict = self._one_test_with(item, directed[t.name], verdict, t, decided[by], by_name[by],
                                              confirming, thresholds.of(t.name))
            decided[t.name] = verdict
        verdicts = list(decided.values())
        throughput_stage = confirm if confirm is not None and any(t.name == THROUGHPUT for t in flagged) else first
        base = self.one_rank_throughput.get(item.scaling_family or "")
        verdicts += derived_verdicts(self.writer, item, directed, base, first, throughput_stage, thresholds.default_pct,
                                     judgement, figure_alpha)
        self._remember_one_rank_throughput(item, first, throughput_stage, judgement)
        return verdicts

    def _run_stage(self, item: JudgedItem, timed: Sequence[Timed], thresholds: Thresholds, source: PairSource,
                   pairs: list[BlockPair], begin: float, judgement: CaseJudgement, alpha: float,
                   confirming: bool = False, peaks: Sequence[tuple[str, Direction]] = ()) -> Stage:
        """Pairs until every metric (and memory peak of ``peaks``) is clear, the cap, or the budget (never fewer
        than the minimum, and at least one pair: the single-reading figures are read from the pairs)."""
        stage = Stage(adjust=self.canary_adjust)
        while True:
            active = [t for t in timed if stage.usable(t.name, t.scale)]
            estimates = [stage.estimate(t.name, t.better, t.scale, alpha) for t in active] if stage.pairs else []
            limits = [thresholds.of(t.name) for t in active] if stage.pairs else []
            if stage.pairs and self.redraw_every:
                estimates += [None if (test := peak_test(pairs, name, better, alpha)) is None else test.estimate
                              for name, better in peaks]
                limits += [thresholds.of(name) for name, _ in peaks]
            if stage.pairs and not timed and (not peaks or (stage.pairs >= self.rule.min_pairs
                                                            and not self.redraw_every)):
                return stage
            if self.rule.settled_exactly([stage.a[t.name] + stage.b[t.name] for t in timed if t.name in stage.a],
                                         single_block_readings(pairs[len(pairs) - stage.pairs:]), stage.pairs):
                judgement.notes.append(f"every tested figure read exactly alike in all {2 * stage.pairs} blocks of "
                                       f"a stage of {stage.pairs} pairs, and no single reading set the sides "
                                       "apart: the stage ended before its minimum")
                return stage
            which = "the confirmation's " if confirming else "the first stage's "
            if not self.rule.wants_more(estimates, limits, stage.pairs, confirming):
                if all(e is not None and is_clear(e, limit) for e, limit in zip(estimates, limits, strict=True)):
                    return stage
                if stage.pairs < self.rule.cap(confirming):
                    stage.stop = (f"{which}futility stop after {stage.pairs} pairs: no unclear figure could be "
                                  f"clear by the cap of {self.rule.max_pairs} at its noise")
                else:
                    stage.stop = f"{which}cap of {stage.pairs} pairs reached"
                judgement.notes.append(stage.stop)
                return stage
            if stage.pairs >= self.rule.min_pairs and source.now() - begin > judgement.budget_s:
                judgement.budget_spent = True
                stage.stop = f"{which}pair budget of {judgement.budget_s:g} s spent after {stage.pairs} pairs"
                judgement.notes.append(stage.stop)
                return stage
            done = sum(judgement.stages) + stage.pairs  # the case's pairs so far, over its stages
            fresh = self.redraw_every > 0 and done > 0 and done % self.redraw_every == 0
            pair = source.pair(fresh, confirming)
            pairs.append(pair)
            stage.take(pair, timed)
            if self.on_pair is not None:
                self.on_pair(item.nodeid, sum(judgement.stages) + stage.pairs)

    def _kind(self, stage: Stage, t: Timed, threshold: float) -> str:
        if not stage.usable(t.name, t.scale):
            return "inconclusive"
        est = stage.estimate(t.name, t.better, t.scale, self.alpha)
        return "inconclusive" if est is None else judge(est, threshold)

    def timed_verdict(self, item: JudgedItem, metric: MetricResult, t: Timed, kind: Any, first: Stage,
                      confirm: Stage | None, threshold: float, judgement: CaseJudgement, figure_alpha: float,
                      one_test_with: str | None = None) -> Verdict:
        """``t``'s verdict: ``kind`` as the first stage found it, standing only where ``confirm`` (the second
        stage of a flagged figure) finds it too at ``figure_alpha``."""
        write = self.writer.write
        a_all = first.a.get(t.name, []) + (confirm.a.get(t.name, []) if confirm else [])
        b_all = first.b.get(t.name, []) + (confirm.b.get(t.name, []) if confirm else [])
        a_med, b_med = median(a_all), median(b_all)
        decisive = confirm if confirm is not None else first
        if not decisive.usable(t.name, t.scale):
            why = ("block medians not all positive, so no ratio exists" if t.scale == "ratio"
                   else "block medians not all finite")
            return write(item, metric, "inconclusive", b_med, a_med, threshold,
                         f"no paired test over {decisive.pairs} block pairs: {why}")
        # a flagged figure fails only when the confirmation finds it at the run-level share of alpha
        est = decisive.estimate(t.name, t.better, t.scale, figure_alpha if confirm is not None else self.alpha)
        if est is None:
            return write(item, metric, "inconclusive", b_med, a_med, threshold,
                         f"too few usable block pairs ({decisive.pairs}) for a paired test")
        evidence = evidence_text(est, decisive.pairs, metric.unit)
        ended = decisive.stop
        proof = est  # the estimate that proves (or not) that the figure is unchanged: at the per-figure alpha
        if confirm is not None:
            first_est = first.estimate(t.name, t.better, t.scale, self.alpha) if first.usable(t.name, t.scale) else None
            confirmed = judge(est, threshold) == kind
            evidence += (f"; first stage of {first.pairs} block pairs: "
                         + (estimate_text(first_est, metric.unit) if first_est else "too few usable pairs")
                         + f", confirmed {'yes' if confirmed else 'no'} by the second stage "
                         f"at alpha {figure_alpha:.3g} (the run-level rule)")
            if one_test_with is not None:
                evidence += (f"; counted as one test with {one_test_with}, the same reading in every first-stage "
                             "block pair")
            if not confirmed:
                # not confirmed by the independent second stage: unchanged only where both stages' pairs together
                # prove it at the per-figure level
                flagged_as = "a regression" if kind == "regression" else "an improvement"
                kind = "unchanged"
                both = first.joined(confirm)
                proof = both.estimate(t.name, t.better, t.scale, self.alpha) or est
                ended = f"{flagged_as} in the first stage and not confirmed by the second"
        if kind == "unchanged" and not is_inside(proof, threshold):
            kind = "inconclusive"
            if proof is not est:
                evidence += f"; both stages' {proof.pairs} pairs together: {estimate_text(proof, metric.unit)}"
            evidence += "; " + unsettled_text(proof, threshold, ended)
        p = est.p_better if kind == "improvement" else est.p_worse
        # the printed change is this estimate's: the working tree's figure is REF's block median moved by it
        current = reconciled_current(b_med, est, t.better)
        evidence += f"; the working tree's own block median: {format_quantity(a_med, metric.unit)}"
        return write(item, metric, kind, b_med, current, threshold, evidence, p_value=p,
                     detectable_pct=proof.detectable_pct(), runs=decisive.pairs,
                     cause="unsettled" if kind == "inconclusive" else None,
                     paired=est.evidence("first" if confirm is None else "confirmation"))

    def _one_test_with(self, item: JudgedItem, metric: MetricResult, verdict: Verdict, t: Timed,
                       by_verdict: Verdict, by: Timed, confirm: Stage | None, threshold: float) -> Verdict:
        """A figure counted as one test with ``by`` (one reading in every first-stage pair) may change only
        where ``by`` changed the same way and the two still agree in every pair of the confirmation; otherwise
        its change is left unsettled, for its own test was not counted in the run-level split."""
        if verdict.kind not in CHANGED or confirm is None:
            return verdict
        own, theirs = confirm.values(t), confirm.values(by)
        agree = own is not None and theirs is not None and same_reading(own, theirs)
        if agree and by_verdict.kind == verdict.kind:
            return verdict
        why = (f"{by.name}, which it read as one with in the first stage, was found {by_verdict.kind}" if agree
               else f"it moved apart from {by.name} in the confirmation's pairs, though the two were one reading in "
               "the first stage's")
        return self.writer.write(item, metric, "inconclusive", verdict.baseline_median, verdict.current_median,
                                 threshold, f"{verdict.kind} in its own test, but {why}; it was counted as one test "
                                 f"with {by.name} in the run-level split, so its own test cannot stand at the "
                                 "run's level and the change is left unsettled", cause="unsettled")

    def _note_first_stage(self, item: JudgedItem, first: Stage, timed: Sequence[Timed]) -> None:
        """Each tested figure's first-stage p-value (A worse), the input of the end-of-run watch list."""
        for t in timed:
            est = first.estimate(t.name, t.better, t.scale, self.alpha) if first.usable(t.name, t.scale) else None
            if est is not None:
                self.first_stage_p.append((item.nodeid, t.name, est.p_worse))

    def _remember_one_rank_throughput(self, item: JudgedItem, first: Stage, decisive: Stage,
                                      judgement: CaseJudgement) -> None:
        """A one-rank scaling variant's judged throughput, the base of its family's speedups."""
        if item.scaling_family is None or item.scaling_world_size != 1 or not decisive.usable(THROUGHPUT, "ratio"):
            return
        est = decisive.estimate(THROUGHPUT, "higher", "ratio", self.alpha)
        if est is None:
            return
        self.one_rank_throughput[item.scaling_family] = OneRankBase(est, *throughput_medians(first, decisive),
                                                                    judgement.budget_spent)

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

