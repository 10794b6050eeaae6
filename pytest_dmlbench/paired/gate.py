"""A's side of the paired gate: interleave A's and B's blocks of every case and judge the pairs.

Per case, after its ordinary run on the working tree (a short calibration run,
:data:`~pytest_dmlbench.measure.rounds.CALIBRATION_BUDGET`, which checks the case and sizes the blocks):
a short warm-up block of B, then block pairs, A and B in an order drawn at random for each pair, until every
judged metric is clear or the cap is reached (:class:`~pytest_dmlbench.paired.statistics.SequentialRule`).
A metric flagged in that stage is measured again in a second, independent stage and fails the item only
when that stage flags it too. Single-reading figures (bytes per step, peak memory) are compared directly.
"""

from __future__ import annotations

import math
import random
import shlex
import statistics as pystats
import time
from collections.abc import Generator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from pytest_dmlbench.baseline.compare import SINGLE_READING_METRICS, failing_verdicts
from pytest_dmlbench.config import DmlbenchConfig
from pytest_dmlbench.paired.blocks import run_block
from pytest_dmlbench.paired.client import RefLaunch, RefProcess
from pytest_dmlbench.paired.statistics import (
    PairedEstimate,
    SequentialRule,
    SingleReading,
    block_median,
    estimate,
    judge,
    log_ratios,
)
from pytest_dmlbench.paired.worktree import RefError, Worktree
from pytest_dmlbench.results import CaseResult, Verdict
from pytest_dmlbench.units import format_quantity

BLOCK_TARGET_S = 0.2  # measured time one block aims at; short blocks keep the two blocks of a pair close in time
MIN_ROUND_S = 0.01  # shorter calls are grouped into rounds of about this length
MIN_BLOCK_ROUNDS = 5
MAX_BLOCK_ROUNDS = 5000
BLOCK_WARMUP = 2


def case_key(nodeid: str, file: Path, tree: Path) -> str:
    """How A's and B's cases are matched: the file relative to its tree's root, then the node id's test
    part (node ids alone depend on each run's rootdir, which pytest derives from its arguments)."""
    try:
        relative = file.resolve().relative_to(tree.resolve()).as_posix()
    except ValueError:
        relative = file.as_posix()
    _, sep, name = nodeid.partition("::")
    return f"{relative}{sep}{name}"


@dataclass(frozen=True)
class BlockPlan:
    """Rounds per block, and at least how many calls each round times (``dmlbench(fn)``/``pedantic``)."""

    rounds: int
    iterations: int = 1

    @classmethod
    def for_step(cls, step_times: list[float], fallback_rounds: int = MIN_BLOCK_ROUNDS) -> BlockPlan:
        """About :data:`BLOCK_TARGET_S` of measured time at these steps' median time; calls shorter than
        :data:`MIN_ROUND_S` are grouped, so that the per-round barrier does not dominate the block."""
        step = block_median(step_times)
        if not (math.isfinite(step) and step > 0):
            return cls(max(MIN_BLOCK_ROUNDS, min(MAX_BLOCK_ROUNDS, fallback_rounds)))
        iterations = max(1, math.ceil(MIN_ROUND_S / step))
        rounds = math.ceil(BLOCK_TARGET_S / (step * iterations))
        return cls(max(MIN_BLOCK_ROUNDS, min(MAX_BLOCK_ROUNDS, rounds)), iterations)

    def warm_up(self) -> BlockPlan:
        """B's first block of a case: a few rounds that warm its code paths and tell which metrics it records."""
        return BlockPlan(min(self.rounds, MIN_BLOCK_ROUNDS), self.iterations)


def block_plan(case: CaseResult) -> BlockPlan:
    """From the ordinary run: its step time, or its own round count when it records no step time."""
    step = case.metrics.get("step_time_s")
    counts = [len(m.samples) for m in case.metrics.values() if len(m.samples) > 1]
    return BlockPlan.for_step(step.samples if step is not None else [], max(counts, default=MIN_BLOCK_ROUNDS))


@dataclass
class Stage:
    """Block medians of one stage, per metric, A and B side by side (one entry per pair)."""

    a: dict[str, list[float]] = field(default_factory=dict)
    b: dict[str, list[float]] = field(default_factory=dict)
    a_first: list[bool] = field(default_factory=list)

    @property
    def pairs(self) -> int:
        return len(self.a_first)

    def estimate(self, name: str, better: Any, alpha: float) -> PairedEstimate | None:
        values, _ = log_ratios(self.a[name], self.b[name], better)
        return estimate(values, alpha)


class BlockFailed(Exception):
    """A block did not pass on one side; the message says which and why."""


@dataclass
class CaseJudgement:
    """Everything the gate found for one case (kept for the summary and the results JSON)."""

    nodeid: str
    verdicts: list[Verdict] = field(default_factory=list)
    stages: list[int] = field(default_factory=list)  # pairs per stage
    plan: BlockPlan | None = None
    notes: list[str] = field(default_factory=list)
    seconds: float = 0.0


class PairedGate:
    """A pytest plugin object in A's process; one per run (xdist is refused)."""

    def __init__(self, config: pytest.Config, settings: DmlbenchConfig, launch: RefLaunch, tree: Worktree,
                 result_key: pytest.StashKey[Any], settings_key: pytest.StashKey[Any],
                 rule: SequentialRule | None = None, alpha: float = 0.01) -> None:
        self.config = config
        self.settings = settings
        self.launch = launch
        self.tree = tree
        self.result_key = result_key
        self.settings_key = settings_key
        self.rule = rule or SequentialRule()
        self.alpha = alpha
        self.ref = RefProcess(launch)
        self.ref_cases: dict[str, str] = {}  # case key -> B's node id
        self.a_cases: dict[str, str] = {}  # case key -> A's node id
        self.judgements: list[CaseJudgement] = []
        self.rng = random.Random()

    # -- pytest hooks --
    @pytest.hookimpl(trylast=True)  # after deselection; B starts up while A's ranks start
    def pytest_collection_modifyitems(self, items: list[pytest.Item]) -> None:
        if any(self.settings_key in item.stash for item in items):
            self.ref.start()

    @pytest.hookimpl(trylast=True)  # after the main plugin started A's ranks
    def pytest_collection_finish(self, session: pytest.Session) -> None:
        self.a_cases = {case_key(item.nodeid, Path(item.path), self.launch.repo_root): item.nodeid
                        for item in session.items if self.settings_key in item.stash}
        if not self.a_cases:
            return
        try:
            hello = self.ref.wait_hello()
        except RefError as exc:
            raise pytest.UsageError(str(exc)) from None
        self.ref_cases = {case_key(c["nodeid"], Path(c["file"]), self.launch.worktree): c["nodeid"]
                          for c in hello["cases"]}

    @pytest.hookimpl(wrapper=True)
    def pytest_pyfunc_call(self, pyfuncitem: pytest.Function) -> Generator[None, Any, Any]:
        outcome = yield  # the ordinary run; raises (and we stay out) when the case failed or skipped
        case = pyfuncitem.stash.get(self.result_key, None)
        if case is not None and self.settings_key in pyfuncitem.stash and case.backend != "local":
            self._judge_item(pyfuncitem, case)
        return outcome

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        if not self.a_cases or self.ref.hello is None:
            return
        from pytest_dmlbench.paired.summary import summary_lines

        terminalreporter.section("dmlbench paired")
        for line in summary_lines(self):
            terminalreporter.write_line(line)

    def pytest_unconfigure(self, config: pytest.Config) -> None:
        self.ref.close()

    # -- one case --
    def _judge_item(self, item: pytest.Function, case: CaseResult) -> None:
        judgement = CaseJudgement(item.nodeid)
        self.judgements.append(judgement)
        begin = time.monotonic()
        problem = None  # failed outside the handlers below, so that no exception chain is shown
        failing: list[Verdict] = []
        try:
            failing = self._judge(item, case, judgement)
        except BlockFailed as exc:
            judgement.notes.append(str(exc).splitlines()[0])
            problem = str(exc)
        except RefError as exc:
            judgement.notes.append("REF stopped serving blocks")
            problem = str(exc)
        finally:
            judgement.seconds = time.monotonic() - begin
            case.verdicts = judgement.verdicts
            plan = judgement.plan or BlockPlan(0, 0)
            case.extra["paired"] = {
                "ref": self.launch.label, "commit": self.tree.commit, "block_rounds": plan.rounds,
                "block_iterations": plan.iterations,
                "pairs_per_stage": judgement.stages, "notes": judgement.notes, "seconds": judgement.seconds,
            }
        if problem is not None:
            pytest.fail(problem, pytrace=False)
        if failing:
            pytest.fail("\n\n".join(v.message for v in failing), pytrace=False)

    def _threshold(self, case: CaseResult) -> float:
        return self.settings.threshold_pct if case.threshold_pct is None else case.threshold_pct

    def _ref_block(self, item: pytest.Function, plan: BlockPlan) -> dict[str, Any]:
        timeout = item.stash[self.settings_key].timeout_s + 60.0
        ref_nodeid = self.ref_cases[case_key(item.nodeid, Path(item.path), self.launch.repo_root)]
        answer = self.ref.block(ref_nodeid, plan.rounds, BLOCK_WARMUP, plan.iterations, timeout)
        if answer["status"] != "passed":
            raise BlockFailed(f"{item.nodeid}: not compared with REF {self.launch.label}: the case "
                              f"{answer['status']} there.\n{answer.get('message', '')}")
        return dict(answer["metrics"])

    def _own_block(self, item: pytest.Function, plan: BlockPlan) -> dict[str, Any]:
        result = run_block(item, plan.rounds, BLOCK_WARMUP, plan.iterations)
        if result.status != "passed":
            raise BlockFailed(f"{item.nodeid}: a block of the working tree's case {result.status} after its "
                              f"ordinary run passed.\n{result.message}")
        return result.metrics

    def _pair(self, item: pytest.Function, plan: BlockPlan, stage: Stage, names: list[str]) -> dict[str, Any]:
        a_first = self.rng.random() < 0.5
        if a_first:
            a = self._own_block(item, plan)
            b = self._ref_block(item, plan)
        else:
            b = self._ref_block(item, plan)
            a = self._own_block(item, plan)
        stage.a_first.append(a_first)
        for name in names:
            stage.a.setdefault(name, []).append(block_median(a.get(name, {}).get("samples", [])))
            stage.b.setdefault(name, []).append(block_median(b.get(name, {}).get("samples", [])))
        return {"a": a, "b": b}

    def _run_stage(self, item: pytest.Function, plan: BlockPlan, names: list[str], better: dict[str, Any],
                   threshold: float, readings: list[dict[str, Any]]) -> Stage:
        stage = Stage()
        while True:
            active = [n for n in names if _positive(stage, n)]  # a ratio needs positive medians
            estimates = [stage.estimate(n, better[n], self.alpha) for n in active] if stage.pairs else []
            if not self.rule.wants_more(estimates, threshold, stage.pairs):
                return stage
            readings.append(self._pair(item, plan, stage, names))

    def _judge(self, item: pytest.Function, case: CaseResult, judgement: CaseJudgement) -> list[Verdict]:
        threshold = self._threshold(case)
        directed = {n: m for n, m in case.metrics.items() if m.better is not None}
        if case_key(item.nodeid, Path(item.path), self.launch.repo_root) not in self.ref_cases:
            judgement.verdicts = [
                Verdict(n, "new", None, block_median(m.samples), None, threshold, None,
                        f"{n}: new case, REF {self.launch.label} has no {item.nodeid}") for n, m in directed.items()]
            judgement.notes.append("new: not in REF")
            return []
        plan = block_plan(case)
        warm = self._ref_block(item, plan.warm_up())  # B's warm-up: discarded, tells which metrics B records
        judgement.plan = plan
        timed = [n for n, m in directed.items() if n not in SINGLE_READING_METRICS and n in warm
                 and len(m.samples) > 1]
        better = {n: directed[n].better for n in timed}
        readings: list[dict[str, Any]] = []
        if timed:
            first = self._run_stage(item, plan, timed, better, threshold, readings)
        else:  # only single-reading figures: one pair reads them
            first = Stage()
            readings.append(self._pair(item, plan, first, []))
        judgement.stages.append(first.pairs)
        names = [n for n in timed if _positive(first, n)]
        for n in sorted(set(timed) - set(names)):
            judgement.notes.append(f"{n} not compared: block medians not all positive, so no ratio exists")
        kinds = {n: self._kind(first, n, better[n], threshold) for n in names}
        failing_kinds = {"regression", "improvement"} if self.settings.fail_on_improvement else {"regression"}
        flagged = [n for n in names if kinds[n] in failing_kinds]  # only what would fail is confirmed
        confirm: Stage | None = None
        if flagged and self.rule.confirm:
            confirm = self._run_stage(item, plan, flagged, better, threshold, readings)
            judgement.stages.append(confirm.pairs)
        verdicts = []
        for n in names:
            kind = kinds[n]
            if confirm is not None and n in flagged and self._kind(confirm, n, better[n], threshold) != kind:
                kind = "unchanged"  # not confirmed by the independent second stage
            verdicts.append(self._timed_verdict(item, case, n, kind, first, confirm if n in flagged else None,
                                                threshold))
        verdicts += self._single_verdicts(item, case, directed, readings, threshold)
        judgement.verdicts = verdicts
        return failing_verdicts(verdicts, self.settings.fail_on_improvement)

    def _kind(self, stage: Stage, name: str, better: Any, threshold: float) -> str:
        est = stage.estimate(name, better, self.alpha)
        return "unchanged" if est is None else judge(est, threshold)

    def reproduce(self, item: pytest.Function) -> str:
        return (f"pytest --dmlbench --world-size {self.settings.world_size} "
                f"--dmlbench-against {self.tree.commit[:12]} {shlex.quote(item.nodeid)}")

    def _timed_verdict(self, item: pytest.Function, case: CaseResult, name: str, kind: Any, first: Stage,
                       confirm: Stage | None, threshold: float) -> Verdict:
        metric = case.metrics[name]
        better = metric.better
        a_all = first.a[name] + (confirm.a[name] if confirm else [])
        b_all = first.b[name] + (confirm.b[name] if confirm else [])
        a_med, b_med = pystats.median(a_all), pystats.median(b_all)
        decisive = confirm if confirm is not None else first
        est = decisive.estimate(name, better, self.alpha)
        ratio_ab = math.nan if est is None else (est.ratio if better == "lower" else 1.0 / est.ratio)
        text = _evidence(name, metric.unit, a_med, b_med, est, decisive.pairs, threshold, self.launch.label)
        if confirm is not None:
            first_est = first.estimate(name, better, self.alpha)
            text += (f"; first stage of {first.pairs} block pairs: "
                     + (_ratio_text(first_est) if first_est else "too few usable pairs")
                     + f", confirmed {'yes' if kind != 'unchanged' else 'no'} by the second stage above")
        if kind == "regression":
            message = f"{name} regressed against REF {self.launch.label}: {text}.\nReproduce: {self.reproduce(item)}"
        elif kind == "improvement":
            message = f"{name} improved against REF {self.launch.label}: {text}."
        else:
            message = f"{name} unchanged against REF {self.launch.label}: {text}"
        p = None if est is None else (est.p_worse if kind != "improvement" else est.p_better)
        return Verdict(name, kind, b_med, a_med, ratio_ab, threshold, p, message, None, decisive.pairs)

    def _single_verdicts(self, item: pytest.Function, case: CaseResult, directed: dict[str, Any],
                         readings: list[dict[str, Any]], threshold: float) -> list[Verdict]:
        verdicts = []
        for name, metric in directed.items():
            if name not in SINGLE_READING_METRICS and len(metric.samples) > 1:
                continue  # timed per round: judged on block pairs
            a_vals = [v for r in readings for v in r["a"].get(name, {}).get("samples", [])]
            b_vals = [v for r in readings for v in r["b"].get(name, {}).get("samples", [])]
            if not a_vals or not b_vals:
                continue
            reading = SingleReading(block_median(a_vals), block_median(b_vals), metric.better, threshold)
            kind = reading.kind()
            change = "identical" if not reading.changed else (
                f"{'+' if reading.bad_pct >= 0 else '-'}{abs(reading.bad_pct):.2f}% "
                f"{'worse' if reading.bad_pct >= 0 else 'better'}")
            text = (f"{format_quantity(reading.b, metric.unit)} (REF) -> {format_quantity(reading.a, metric.unit)} "
                    f"(working tree), {change}; threshold {threshold:g}%; a single-reading figure, compared "
                    f"exactly (median over {len(readings)} blocks each side), no statistical test")
            lead = {"regression": "regressed", "improvement": "improved"}.get(kind, "unchanged")
            message = f"{name} {lead} against REF {self.launch.label}: {text}"
            if kind == "regression":
                message += f".\nReproduce: {self.reproduce(item)}"
            verdicts.append(Verdict(name, kind, reading.b, reading.a, reading.ratio, threshold, None, message))
        return verdicts


def _positive(stage: Stage, name: str) -> bool:
    values = stage.a.get(name, []) + stage.b.get(name, [])
    return bool(values) and all(math.isfinite(v) and v > 0 for v in values)


def _ratio_text(est: PairedEstimate) -> str:
    low, high = est.ci
    improved = est.mean_log < 0
    return (f"ratio {est.ratio:.3f} [{100 * (1 - 2 * est.alpha):g}% CI {low:.3f}, {high:.3f}], "
            f"one-sided paired t-test p={est.p_better if improved else est.p_worse:.3g} "
            f"(H1: working tree {'better' if improved else 'worse'})")


def _evidence(name: str, unit: str, a_med: float, b_med: float, est: PairedEstimate | None, pairs: int,
              threshold: float, label: str) -> str:
    medians = f"block medians {format_quantity(b_med, unit)} (REF) -> {format_quantity(a_med, unit)} (working tree)"
    if est is None:
        return f"{medians}; too few usable block pairs ({pairs}) for a paired test"
    change = 100.0 * (est.ratio - 1.0)
    return (f"{medians}, {'+' if change >= 0 else '-'}{abs(change):.1f}% {'worse' if change >= 0 else 'better'}; "
            f"{_ratio_text(est)} (ratio = A/B in the bad direction) over {pairs} block pairs, alpha {est.alpha:g}; "
            f"threshold {threshold:g}%; per-pair noise {est.noise_pct:.1f}%, smallest slowdown detectable at 95% "
            f"with these pairs {est.detectable_pct():.1f}%")
