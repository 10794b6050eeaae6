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

This module is the gate's face: REF's lifecycle (its worktree, its block server and A's, restarts), what
is judged per case (in-process figures REF cannot re-measure, cases REF lacks, the warm-up), the results
record and the summary. The decision itself is :class:`~pytest_dmlbench.gates.paired.trial.Trial`'s, on
pairs from :class:`~pytest_dmlbench.gates.paired.live_source.LiveSource`; a replayed night runs the same
trial on recorded pairs (``gates/replay.py``).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Literal

import pytest

from pytest_dmlbench.config import DmlbenchConfig
from pytest_dmlbench.errors import RefError
from pytest_dmlbench.gates.figures import is_single_reading
from pytest_dmlbench.gates.gate import GateDecision, JudgedItem
from pytest_dmlbench.gates.paired.client import RefLaunch, RefProcess
from pytest_dmlbench.gates.paired.live_source import BlockFailed, BlockServers, LiveSource, redraw_interval
from pytest_dmlbench.gates.paired.plan import BlockPlan, block_plan, case_key
from pytest_dmlbench.gates.paired.stage import CaseJudgement
from pytest_dmlbench.gates.paired.statistics import SequentialRule
from pytest_dmlbench.gates.paired.trial import Trial
from pytest_dmlbench.gates.paired.verdict_writer import VerdictWriter
from pytest_dmlbench.gates.paired.worktree import Worktree
from pytest_dmlbench.gates.profile_diff import grown, growth_text
from pytest_dmlbench.gates.run_level import RunLevelRule
from pytest_dmlbench.gates.thresholds import Thresholds
from pytest_dmlbench.measure.op_profile import BlockProfile
from pytest_dmlbench.measure.rounds import CALIBRATION_BUDGET, BlockBudget
from pytest_dmlbench.results import CaseResult, MetricResult, Verdict
from pytest_dmlbench.results.stats import median
from pytest_dmlbench.results.student_t import DEFAULT_ALPHA

MAX_SERVER_RESTARTS = 2  # per block server and run: a server that keeps dying is a problem to report


class PairedGate:
    """A's side; registered as a pytest plugin for its lifecycle (start B, wait for its cases, summary)."""

    def __init__(self, settings: DmlbenchConfig, launch: RefLaunch, tree: Worktree, own: RefLaunch,
                 rule: SequentialRule | None = None, alpha: float = DEFAULT_ALPHA) -> None:
        self.settings = settings
        self.launch = launch
        self.tree = tree
        self.writer = VerdictWriter(launch.label, tree.commit)
        self.trial = Trial(self.writer, RunLevelRule(settings.run_alpha, 1),  # counted again at collection
                           rule or SequentialRule(futility=settings.futility), alpha, settings.pair_budget_s,
                           settings.canary_adjust)
        self.kept_worlds_note: str | None = None  # why worlds are kept although redrawn ones were asked for
        # B's blocks, and A's: the working tree's cases in a server like B's
        self.servers = BlockServers(RefProcess(launch), RefProcess(own), launch.repo_root, settings.block_warmup)
        self.a_cases: dict[str, str] = {}  # case key -> A's node id
        self.judgements: list[CaseJudgement] = []

    @property
    def against(self) -> str:
        return self.writer.against

    @property
    def on_pair(self) -> Callable[[str, int], None] | None:
        """Told (node id, pairs so far) after each block pair (the live progress line)."""
        return self.trial.on_pair

    @on_pair.setter
    def on_pair(self, listener: Callable[[str, int], None] | None) -> None:
        self.trial.on_pair = listener

    def reproduce(self, item: JudgedItem) -> str:
        return self.writer.reproduce(item)

    # -- lifecycle --
    def case_budget(self) -> BlockBudget:
        """A short calibration run, which checks the case and sizes its blocks: the block pairs measure after."""
        return CALIBRATION_BUDGET

    def collected(self, items: Sequence[tuple[str, Path]], measuring: int) -> None:
        """A's cases (node id, file), before A's worlds start: B starts now, so both start together."""
        self.trial.run_rule = RunLevelRule(self.settings.run_alpha, measuring)
        self.a_cases = {case_key(nodeid, path, self.launch.repo_root): nodeid for nodeid, path in items}
        if self.a_cases:
            self.servers.ref.start()
            self.servers.own.start()

    def ready(self) -> None:
        """After A's worlds started: wait for B's announcement of its cases."""
        if not self.a_cases:
            return
        servers = self.servers
        try:
            hello = servers.ref.wait_hello()
            own_hello = servers.own.wait_hello()
        except RefError as exc:
            raise pytest.UsageError(str(exc)) from None
        servers.ref_cases = {case_key(c["nodeid"], Path(c["file"]), self.launch.worktree): c["nodeid"]
                             for c in hello["cases"]}
        servers.own_cases = {case_key(c["nodeid"], Path(c["file"]), self.launch.repo_root): c["nodeid"]
                             for c in own_hello["cases"]}
        self.trial.redraw_every, self.kept_worlds_note = redraw_interval(self.settings.redraw_worlds,
                                                                         (servers.ref, servers.own))

    def finishing(self) -> None:
        """Ask both block servers to end: each tears its session down in seconds (its worlds, its plugins'
        end-of-session work), side by side and while this run writes its summary."""
        self.servers.ref.request_end()
        self.servers.own.request_end()

    def close(self) -> None:
        """End both block servers (asked together, unless :meth:`finishing` asked already) and wait for them."""
        self.finishing()
        self.servers.ref.close()
        self.servers.own.close()

    def summary_lines(self) -> list[str]:
        """REF, each case's verdicts in one line, the cases on one side only."""
        if not self.a_cases or self.servers.ref.hello is None:
            return []
        hello = self.servers.ref.hello
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
        removed = sorted(nodeid for key, nodeid in self.servers.ref_cases.items() if key not in self.a_cases)
        if removed:
            lines.append(f"removed: {len(removed)} case(s) REF has and the working tree does not:")
            lines.extend(f"  {nodeid}" for nodeid in removed)
        pairs = [sum(j.stages) for j in self.judgements if j.stages]
        if pairs:
            lines.append(f"block pairs per case: median {median(pairs):g}, min {min(pairs)}, max {max(pairs)}")
        return lines + self.trial.watch_lines()

    # -- one case --
    def judge(self, item: JudgedItem, result: CaseResult) -> GateDecision:
        judgement = CaseJudgement(item.nodeid)
        self.judgements.append(judgement)
        begin = time.monotonic()
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
        judgement.seconds = time.monotonic() - begin
        plan = judgement.plan or BlockPlan(0, 0)
        extra = {"paired": {
            "ref": self.launch.label, "commit": self.tree.commit, "block_rounds": plan.rounds,
            "block_iterations": plan.iterations, "block_warmup": self.settings.block_warmup,
            "block_min_rounds": self.settings.block_min_rounds,
            "redraw_worlds": self.trial.redraw_every, "mmap_threshold": self.settings.mmap_threshold,
            "rank_allocator": self.settings.rank_allocator,
            "canary": "during" if self.settings.canary_during else "beside",
            "pairs_per_stage": judgement.stages, "notes": judgement.notes,
            "seconds": judgement.seconds, "budget_s": judgement.budget_s, "budget_spent": judgement.budget_spent,
            "block_medians": judgement.block_medians,
        }}
        if judgement.profile is not None:
            extra["paired"]["profile"] = judgement.profile
        return GateDecision(list(judgement.verdicts), extra=extra, problem=problem, notes=list(judgement.case_notes))

    def _revive(self, judgement: CaseJudgement) -> None:
        """Restart a block server that stopped during an earlier case (a block that hung past its timeout
        or crashed it), so that one case cannot end the run's comparisons: at most
        :data:`MAX_SERVER_RESTARTS` times per server and run, after which its cases fail as before."""
        for server in (self.servers.ref, self.servers.own):
            if server.stopped and server.restarts < MAX_SERVER_RESTARTS:
                server.restart()
                judgement.notes.append(f"{server.launch.speaker} restarted after it stopped serving "
                                       f"({server.restarts} of {MAX_SERVER_RESTARTS})")

    def _judge(self, item: JudgedItem, case: CaseResult, judgement: CaseJudgement, begin: float) -> None:
        run_thresholds = Thresholds(self.settings.threshold_pct, self.settings.cpu_threshold_pct,
                                    cpu_where_computing=not self.settings.cpu_threshold_given)
        thresholds = run_thresholds.for_case(case)
        directed = {n: m for n, m in case.metrics.items() if m.better is not None and thresholds.judges(n)}
        if item.in_process and not self.servers.ref.offers("in_process_blocks"):
            judgement.notes.append("in-process figures: REF cannot re-measure them")
            version = self.servers.ref.plugin_version
            judgement.verdicts = [self._untested(
                item, m, "inconclusive", thresholds.default_pct,
                f"recorded in the pytest process, and REF's pytest-dmlbench ({version}) predates re-measuring "
                "such figures in blocks; they are judged once REF holds a pytest-dmlbench that does")
                for m in directed.values()]
            return
        if not self.servers.has(item):
            judgement.notes.append("new: not in REF")
            judgement.verdicts = [self._untested(item, m, "new", thresholds.default_pct,
                                                 f"REF {self.launch.label} has no {item.nodeid}")
                                  for m in directed.values()]
            return
        if (waiting := run_thresholds.waiting_note(case)) is not None:
            judgement.case_notes.append(waiting)
        plan = block_plan(case, self.settings.block_seconds, self.settings.block_min_rounds)
        judgement.plan = plan
        if self.kept_worlds_note is not None:
            judgement.notes.append(self.kept_worlds_note)
        # the warm-ups, discarded, tell which figures B records (a case starts on fresh worlds when they are redrawn)
        ref_units = self.servers.warm_up(item, plan, fresh_world=self.trial.redraw_every > 0)
        source = LiveSource(self.servers, item, plan, canary_during=self.settings.canary_during)
        verdicts = self.trial.judge_case(item, directed, ref_units, thresholds, source, judgement, begin)
        judgement.verdicts = verdicts
        # a regression of a figure tested on pairs (single readings are compared directly) is explained
        if any(v.kind == "regression" and not is_single_reading(v.metric) for v in verdicts):
            explanation = self._explain(item, plan, judgement)
            judgement.verdicts = [replace(v, message=f"{v.message}\n{explanation}")
                                  if v.kind == "regression" and not is_single_reading(v.metric) else v
                                  for v in verdicts]

    def _untested(self, item: JudgedItem, metric: MetricResult, kind: Literal["inconclusive", "new"],
                  threshold: float, evidence: str) -> Verdict:
        return self.writer.write(item, metric, kind, None, median(metric.samples), threshold, evidence)

    def _explain(self, item: JudgedItem, plan: BlockPlan, judgement: CaseJudgement) -> str:
        """Where a confirmed regression's time went: one profiled block of each side, in a random order,
        compared by operator (:mod:`pytest_dmlbench.gates.profile_diff`); why not, when it cannot be said."""
        if not self.servers.ref.offers("profiles_blocks"):
            version = self.servers.ref.plugin_version
            return (f"Where the time grew: not profiled, REF's pytest-dmlbench ({version}) predates profiled "
                    "blocks")
        try:
            a, b = self.servers.profiled(item, plan)
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
