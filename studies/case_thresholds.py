"""Per-case thresholds from measured noise: each case's tightest threshold that still settles, from recorded A/A runs.

    python -m studies.case_thresholds RESULTS.json [RESULTS.json ...] [--out FILE] [--nights 30]

RESULTS are whole-suite paired runs on unchanged code (as ``studies/replay_nights.py`` reads them). Each case
is replayed alone through the gate's trial (``gates/replay.py``: its recorded pairs resampled, the run-level
alpha split over every case of the suite as in a night) at each threshold of a grid, smallest first. Its
threshold is the smallest at which its replayed nights settle at least ``--settle`` of its timed wall-time
figures (proven unchanged; memory peaks and counts, read once a block, are not counted) and none turns red;
its CPU threshold likewise for CPU time per step, where the recordings judged it. Then, at those thresholds
and at the run's defaults (``--default``, ``--default-cpu``): the settled share, and the smallest slowdown of
the case (every timed figure) caught as a regression in at least ``--catch`` of the replayed nights. Last,
whole nights replayed with every case at its own thresholds, against the defaults: nights red for nothing,
settled share, pair minutes.

A case's runs that lack one of its figures (recorded before the figure was) are left out, and the count said:
give it recordings made with the figures of today's cases. ``--out`` writes the thresholds for
``--dmlbench-case-thresholds`` (``pytest_dmlbench/config/case_thresholds.py``), each case's measurements beside
them. The thresholds are chosen and replayed on the same recordings, so the replayed false-red share is
in-sample: judge them by live A/A nights too.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import random
import statistics
import sys
import time
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pytest_dmlbench.config import DEFAULT_RUN_ALPHA, DEFAULT_THRESHOLD_PCT
from pytest_dmlbench.config.case_thresholds import SCHEMA
from pytest_dmlbench.gates.figures import CPU_TIME_METRICS, is_single_reading
from pytest_dmlbench.gates.paired.recorded import RecordedCase, load_recorded
from pytest_dmlbench.gates.paired.statistics import SequentialRule, estimate, log_ratios
from pytest_dmlbench.gates.replay import Replay, replay_night
from pytest_dmlbench.gates.wording import fails
from pytest_dmlbench.results import Verdict

NIGHTLY_CPU_THRESHOLD = 10.0  # ci/nightly.sh's DMLBENCH_CPU_THRESHOLD default


@dataclass(frozen=True)
class Settings:
    nights: int
    grid: tuple[float, ...]
    cpu_grid: tuple[float, ...]
    slowdowns: tuple[float, ...]
    settle: float
    catch: float
    run_alpha: float
    judged_cases: int
    futility: bool
    block: int
    seed: int


@dataclass(frozen=True)
class Replayed:
    """What ``nights`` replays of one case at one setting gave, per figure kind."""

    settled: float  # share of the kind's timed figures settled, over all replays (single readings not counted)
    red: int  # replays with a failing verdict
    caught: float  # share of replays with a regression verdict


@dataclass(frozen=True)
class CaseFinding:
    nodeid: str
    world_size: int
    noise_pct: dict[str, float]
    threshold: float | None  # None: no grid value settles its wall-time figures
    cpu_threshold: float | None  # None: CPU time not recorded, or no grid value settles it
    settled: float  # at its own thresholds, every figure of the case
    caught_pct: float | None  # smallest slowdown caught in --catch of the nights at its own thresholds
    default_settled: float
    default_caught_pct: float | None


def _is_cpu(name: str) -> bool:
    return name in CPU_TIME_METRICS


def complete_runs(case: RecordedCase) -> RecordedCase:
    """``case`` with only the runs whose every pair records each of its figures: a run recorded before a figure
    was (CPU time, say) would leave that figure unsettled for want of pairs, not for its noise."""
    kept = [(run, spp) for run, spp in zip(case.runs, case.seconds_per_pair, strict=True)
            if run and all(name in pair[0] and name in pair[1] for pair in run for name in case.figures)]
    return dataclasses.replace(case, runs=[run for run, _ in kept], seconds_per_pair=[spp for _, spp in kept])


def has_cpu(case: RecordedCase) -> bool:
    return any(_is_cpu(name) for name in case.figures)


def noise_of(case: RecordedCase) -> dict[str, float]:
    """Per-pair noise (percent) of each tested figure, all recorded pairs pooled."""
    noise: dict[str, float] = {}
    for name, (unit, better) in sorted(case.figures.items()):
        a = [pair[0][name] for run in case.runs for pair in run if name in pair[0] and name in pair[1]]
        b = [pair[1][name] for run in case.runs for pair in run if name in pair[0] and name in pair[1]]
        if unit == "fraction":
            continue  # judged in points, not as a ratio
        values, _ = log_ratios(a, b, better)
        est = estimate(values) if values else None
        if est is not None:
            noise[name] = round(est.noise_pct, 2)
    return noise


def _replay(case: RecordedCase, settings: Settings, threshold: float, cpu_threshold: float | None,
            slowdown: float = 0.0, kinds: str = "all") -> Replayed:
    """``settings.nights`` replays of ``case`` alone; ``kinds``: whose settling counts (wall, cpu or all)."""
    rng = random.Random(f"{settings.seed}:{case.nodeid}:{threshold}:{cpu_threshold}:{slowdown}")
    at = dataclasses.replace(case, threshold_pct=threshold, cpu_threshold_pct=cpu_threshold)
    rule = SequentialRule(futility=settings.futility)
    settled, red, caught = 0.0, 0, 0
    for _ in range(settings.nights):
        replay = Replay(settings.run_alpha, settings.judged_cases, rule)
        verdicts = replay.replay_case(at, rng, slowdown / 100.0, settings.block)
        counted = [v for v in verdicts if not is_single_reading(v.metric)
                   and (kinds == "all" or _is_cpu(v.metric) == (kinds == "cpu"))]
        settled += sum(_settled(v) for v in counted) / len(counted) if counted else 0.0
        red += any(fails(v, False) for v in verdicts)
        caught += any(v.kind == "regression" for v in verdicts)
    return Replayed(settled / settings.nights, red, caught / settings.nights)


def _settled(verdict: Verdict) -> bool:
    return verdict.kind in ("unchanged", "regression", "improvement")


def _smallest_caught(case: RecordedCase, settings: Settings, threshold: float, cpu: float | None) -> float | None:
    for slowdown in settings.slowdowns:
        if slowdown > min(threshold, cpu if cpu is not None else threshold) and \
                _replay(case, settings, threshold, cpu, slowdown).caught >= settings.catch:
            return slowdown
    return None


def _tightest(case: RecordedCase, settings: Settings, grid: Sequence[float], kinds: str,
              other: float | None) -> float | None:
    """The smallest grid value at which replays settle --settle of ``kinds``'s timed figures, none red."""
    for value in grid:
        threshold, cpu = (value, other) if kinds == "wall" else (other if other is not None else value, value)
        replayed = _replay(case, settings, threshold, cpu, kinds=kinds)
        if replayed.settled >= settings.settle and replayed.red == 0:
            return value
    return None


def study_case(case: RecordedCase, settings: Settings, default: float, default_cpu: float) -> CaseFinding:
    """One case's thresholds and what they settle and catch, beside the defaults'."""
    has_wall = any(not _is_cpu(name) and not is_single_reading(name) for name in case.figures)
    cpu_default = default_cpu if has_cpu(case) else None
    threshold = _tightest(case, settings, settings.grid, "wall", cpu_default) if has_wall else default
    cpu = _tightest(case, settings, settings.cpu_grid, "cpu", threshold or default) if has_cpu(case) else None
    own_wall = default if threshold is None else threshold  # a case the file cannot list keeps the run's
    own_cpu = cpu_default if cpu is None else cpu
    return CaseFinding(
        case.nodeid, case.world_size, noise_of(case), threshold, cpu,
        _replay(case, settings, own_wall, own_cpu).settled, _smallest_caught(case, settings, own_wall, own_cpu),
        _replay(case, settings, default, cpu_default).settled, _smallest_caught(case, settings, default, cpu_default))


def _percent(value: float | None) -> str:
    return "-" if value is None else f"{value:g} %"


def as_file(findings: Sequence[CaseFinding], made: dict[str, Any]) -> dict[str, Any]:
    """The thresholds file ``--dmlbench-case-thresholds`` reads, each case's measurements beside its thresholds."""
    cases: dict[str, Any] = {}
    for f in findings:
        entry: dict[str, Any] = {}
        if f.threshold is not None:
            entry["threshold"] = f.threshold
        if f.cpu_threshold is not None:
            entry["cpu_threshold"] = f.cpu_threshold
        entry["measured"] = {"noise_pct": f.noise_pct, "settled_share": round(f.settled, 3),
                             "smallest_caught_pct": f.caught_pct,
                             "at_defaults": {"settled_share": round(f.default_settled, 3),
                                             "smallest_caught_pct": f.default_caught_pct}}
        cases[f.nodeid] = entry
    return {"schema": SCHEMA, "made": made, "cases": cases}


def _floats(text: str) -> tuple[float, ...]:
    return tuple(sorted(float(v) for v in text.split(",") if v.strip()))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("results", nargs="+", type=Path)
    parser.add_argument("--out", type=Path, default=None, help="write the thresholds file here")
    parser.add_argument("--nights", type=int, default=30, help="replays of each case at each setting")
    parser.add_argument("--grid", default="2.5,5,7.5,10,15,20,30,50", help="wall-time thresholds tried, percent")
    parser.add_argument("--cpu-grid", default="1,1.5,2,2.5,3.5,5,7.5,10", help="CPU thresholds tried, percent")
    parser.add_argument("--slowdowns", default="2.5,5,7.5,10,15,20,30,50,100", help="percent, tried smallest first")
    parser.add_argument("--settle", type=float, default=0.9, help="share of replays that must settle")
    parser.add_argument("--catch", type=float, default=0.9, help="share of replays that must catch a slowdown")
    parser.add_argument("--default", type=float, default=DEFAULT_THRESHOLD_PCT, help="the run's threshold")
    parser.add_argument("--default-cpu", type=float, default=NIGHTLY_CPU_THRESHOLD, help="the run's CPU threshold")
    parser.add_argument("--run-alpha", type=float, default=DEFAULT_RUN_ALPHA)
    parser.add_argument("--futility", choices=("on", "off"), default="on", help="as ci/nightly.sh (on)")
    parser.add_argument("--whole-nights", type=int, default=100, help="whole nights replayed at the end")
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--block", type=int, default=3)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    try:
        recorded = load_recorded(args.results)
    except ValueError as exc:
        print(f"case_thresholds: {exc}", file=sys.stderr)
        return 2
    complete = [complete_runs(case) for case in sorted(recorded.values(), key=lambda c: c.nodeid)]
    cases = [case for case in complete if case.runs]
    left_out = sum(len(recorded[case.nodeid].runs) - len(case.runs) for case in complete)
    if left_out:
        print(f"left out: {left_out} recorded run(s) of a case that lack one of its figures (recorded before it was), "
              f"{len(complete) - len(cases)} case(s) left with none")
    settings = Settings(args.nights, _floats(args.grid), _floats(args.cpu_grid), _floats(args.slowdowns),
                        args.settle, args.catch, args.run_alpha, len(cases), args.futility == "on", args.block,
                        args.seed)
    begin = time.monotonic()
    print(f"{len(cases)} cases from {len(args.results)} file(s); {args.nights} replays a setting; settle "
          f"{args.settle:.0%}, catch {args.catch:.0%}; defaults {args.default:g} % and CPU {args.default_cpu:g} %; "
          f"futility {args.futility}")
    with ProcessPoolExecutor(max_workers=args.jobs) as pool:
        findings = list(pool.map(study_case, cases, [settings] * len(cases), [args.default] * len(cases),
                                 [args.default_cpu] * len(cases)))
    print("| case | ws | noise (per pair) | threshold | CPU threshold | settled | smallest caught | "
          "at defaults: settled | smallest caught |")
    print("|---|---|---|---|---|---|---|---|---|")
    for f in findings:
        noise = ", ".join(f"{name} {pct:.1f} %" for name, pct in f.noise_pct.items())
        print(f"| {f.nodeid} | {f.world_size} | {noise} | {_percent(f.threshold)} | {_percent(f.cpu_threshold)} | "
              f"{f.settled:.0%} | {_percent(f.caught_pct)} | {f.default_settled:.0%} | "
              f"{_percent(f.default_caught_pct)} |")
    own = {f.nodeid: f for f in findings}
    at_own = [dataclasses.replace(c, threshold_pct=own[c.nodeid].threshold or args.default,
                                  cpu_threshold_pct=(own[c.nodeid].cpu_threshold or args.default_cpu)
                                  if has_cpu(c) else None) for c in cases]
    at_default = [dataclasses.replace(c, threshold_pct=args.default,
                                      cpu_threshold_pct=args.default_cpu if has_cpu(c) else None) for c in cases]
    rule = SequentialRule(futility=args.futility == "on")
    for label, night_cases in (("per-case thresholds", at_own), ("defaults", at_default)):
        rng = random.Random(args.seed)
        nights = [replay_night(night_cases, rng, args.run_alpha, block=args.block, rule=rule)
                  for _ in range(args.whole_nights)]
        red = sum(bool(n.red_cases) for n in nights)
        settled = [100.0 * n.settled / n.judged for n in nights if n.judged]
        minutes = [n.pair_seconds / 60.0 for n in nights]
        print(f"whole nights at {label}: {red} of {len(nights)} red for nothing; settled share median "
              f"{statistics.median(settled):.1f} %; pairs median {statistics.median(minutes):.1f} min")
    print(f"({time.monotonic() - begin:.0f} s)")
    if args.out is not None:
        made = {"by": "python -m studies.case_thresholds", "on": time.strftime("%Y-%m-%d"),
                "from": [p.name for p in args.results],
                "nights": args.nights, "settle": args.settle, "catch": args.catch, "futility": args.futility}
        args.out.write_text(json.dumps(as_file(findings, made), indent=1) + "\n")
        print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
