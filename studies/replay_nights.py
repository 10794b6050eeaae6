"""Replay nights from recorded A/A block pairs through the paired gate's trial (its decision code).

    python -m studies.replay_nights RESULTS.json [RESULTS.json ...] [--nights 300] [--slowdowns 5,10,15]

RESULTS are the results files of whole-suite paired runs on unchanged code (``ci/nightly.sh`` with a
comment-only change, or ``--dmlbench-against HEAD`` on a clean tree). Each replayed night runs every case
once with pairs resampled from the recordings (moving blocks of consecutive pairs) and reports:

- false reds: the share of nights with any failing case when nothing changed (target: at most 1 %);
- what an unchanged night costs: its pairs' seconds (each case's recorded seconds per pair) against what the
  recorded runs spent, and its unsettled figures, so that another ``--threshold`` shows its price too;
- per injected slowdown, per world size: the share of nights in which one case made that much slower is
  caught (a regression verdict), over cases drawn from those that record ``step_time_s`` (or only those
  matching ``--inject-into``, e.g. the communication-bound collectives), and the share in which some
  *other* case turned red beside it.

    python -m studies.replay_nights night*.json.gz --nights 0 --inject-into test_collectives.py --slowdowns 10,20,30
    python -m studies.replay_nights night.json --cpu-threshold 10     # CPU time judged at 10 % (or: off)
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import time
from collections import defaultdict
from pathlib import Path

from pytest_dmlbench.config import DEFAULT_RUN_ALPHA, CpuThreshold, parse_cpu_threshold
from pytest_dmlbench.errors import ConfigError
from pytest_dmlbench.gates.figures import SINGLE_READING_METRICS
from pytest_dmlbench.gates.paired.recorded import RecordedCase, load_recorded
from pytest_dmlbench.gates.paired.statistics import SequentialRule
from pytest_dmlbench.gates.replay import recorded_pair_seconds, replay_night


def _cpu_threshold(text: str) -> CpuThreshold:
    try:
        return parse_cpu_threshold(text, "--cpu-threshold")
    except ConfigError as problem:
        raise argparse.ArgumentTypeError(str(problem)) from None


def _shown(threshold: CpuThreshold) -> str:
    return threshold if isinstance(threshold, str) else f"{threshold:g} %"


def _percent(part: int, whole: int) -> str:
    return f"{100.0 * part / whole:.1f} %" if whole else "n/a"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("results", nargs="+", type=Path)
    parser.add_argument("--nights", type=int, default=300)
    parser.add_argument("--slowdowns", default="5,10,15", help="percent, comma-separated")
    parser.add_argument("--injected-nights", type=int, default=100, help="nights per slowdown and world size")
    parser.add_argument("--block", type=int, default=3, help="consecutive recorded pairs drawn together")
    parser.add_argument("--run-alpha", type=float, default=DEFAULT_RUN_ALPHA)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threshold", type=float, default=None,
                        help="percent: replay under this run threshold instead of the recorded one (marker "
                        "thresholds stay)")
    parser.add_argument("--cpu-threshold", type=_cpu_threshold, default=None,
                        help="percent, or off: replay CPU time (cpu_time_s) under this run CPU threshold instead "
                        "of the recorded one, from the CPU pairs a run recorded where it judged CPU time")
    parser.add_argument("--canary", choices=("on", "off"), default="off",
                        help="adjust the pairs for the recorded canary (--dmlbench-canary); pairs recorded "
                        "without one are not adjusted")
    parser.add_argument("--futility", choices=("on", "off"), default="off",
                        help="end a stage once no unclear figure could be clear by the cap of pairs, on the "
                             "current mean and noise (the gate's SequentialRule(futility=True))")
    parser.add_argument("--exclude", action="append", default=[], metavar="TEXT",
                        help="leave out the cases whose node id contains TEXT (repeatable), e.g. the cases of a "
                        "recording made before a fix to them; say so wherever the figures are quoted")
    parser.add_argument("--inject-into", action="append", default=[], metavar="TEXT",
                        help="slow only cases whose node id contains TEXT (repeatable); default: any case that "
                        "records step_time_s")
    parser.add_argument("--two-stage", action="store_true",
                        help="confirm at run alpha / (tests x the first stage's 1 %%), the bound that holds when "
                        "the two stages' pairs are independent (RunLevelRule.two_stage); the gate does not")
    args = parser.parse_args(argv)
    adjust = args.canary == "on"
    rule = SequentialRule(futility=args.futility == "on")
    try:
        recorded = load_recorded(args.results, run_threshold_pct=args.threshold, run_cpu_threshold=args.cpu_threshold)
    except ValueError as exc:
        print(f"replay_nights: {exc}", file=sys.stderr)
        return 2
    cases = sorted((c for c in recorded.values() if not any(text in c.nodeid for text in args.exclude)),
                   key=lambda c: c.nodeid)
    if args.exclude:
        print(f"left out: {len(recorded) - len(cases)} case(s) matching {', '.join(args.exclude)}")
    rng = random.Random(args.seed)
    runs = {len(c.runs) for c in cases}
    print(f"{len(cases)} cases with recorded pairs from {len(args.results)} file(s) ({min(runs)}-{max(runs)} "
          f"runs a case, {statistics.median(c.pairs for c in cases):g} pairs a case at the median); "
          f"run alpha {args.run_alpha:g}, blocks of {args.block} pairs"
          + (f", run threshold {args.threshold:g} %" if args.threshold is not None else "")
          + (f", CPU threshold {_shown(args.cpu_threshold)}" if args.cpu_threshold is not None else "")
          + f", canary adjustment {args.canary}, futility stop {args.futility}"
          + (", confirmed at the two-stage level" if args.two_stage else ""))
    begin = time.monotonic()
    red_nights = 0
    red_by_case: dict[str, int] = defaultdict(int)
    pair_minutes: list[float] = []
    unsettled: list[int] = []
    settled: list[float] = []
    candidates: dict[int, list[RecordedCase]] = defaultdict(list)
    for case in cases:
        if "step_time_s" in case.figures and (not args.inject_into
                                               or any(text in case.nodeid for text in args.inject_into)):
            candidates[case.world_size].append(case)
    if args.inject_into and not candidates:
        print(f"replay_nights: no case that records step_time_s matches {', '.join(args.inject_into)}",
              file=sys.stderr)
        return 2
    for _ in range(args.nights):
        night = replay_night(cases, rng, args.run_alpha, block=args.block, canary_adjust=adjust, rule=rule,
                             two_stage=args.two_stage)
        red_nights += bool(night.red_cases)
        pair_minutes.append(night.pair_seconds / 60.0)
        unsettled.append(night.unsettled)
        settled.append(100.0 * night.settled / night.judged if night.judged else 0.0)
        for nodeid in night.red_cases:
            red_by_case[nodeid] += 1
    print(f"unchanged code: {red_nights} of {args.nights} nights red ({_percent(red_nights, args.nights)}); "
          f"{time.monotonic() - begin:.0f} s")
    if pair_minutes:
        print(f"  pairs of an unchanged night: median {statistics.median(pair_minutes):.1f} min "
              f"({min(pair_minutes):.1f}-{max(pair_minutes):.1f}), against "
              f"{recorded_pair_seconds(cases) / 60.0:.1f} min in the recorded runs; unsettled figures: median "
              f"{statistics.median(unsettled):g} ({min(unsettled)}-{max(unsettled)}); settled share of the judged "
              f"figures: median {statistics.median(settled):.1f} % ({min(settled):.1f}-{max(settled):.1f} %)")
        recorded_names = {name for case in cases for name in case.figures}
        lacking = sorted(SINGLE_READING_METRICS - recorded_names)
        if lacking:
            print(f"  not in these recordings: {', '.join(lacking)} (recordings made before 0.4.0 keep the timed "
                  "figures' block medians only, and those made before a figure was recorded lack it; replaying memory "
                  "peaks and exact counts needs recordings that keep their per-block readings, as paired runs do "
                  "from 0.4.0 on)")
    for nodeid, count in sorted(red_by_case.items(), key=lambda kv: -kv[1])[:10]:
        print(f"  red in {count} night(s): {nodeid}")
    for pct in (float(v) for v in args.slowdowns.split(",") if v.strip()):
        for world_size in sorted(candidates):
            caught = other_red = 0
            for _ in range(args.injected_nights):
                target = rng.choice(candidates[world_size])
                night = replay_night(cases, rng, args.run_alpha, target.nodeid, pct / 100.0, args.block,
                                     canary_adjust=adjust, rule=rule, two_stage=args.two_stage)
                caught += night.slowed_kind == "regression"
                other_red += any(nodeid != target.nodeid for nodeid in night.red_cases)
            print(f"{pct:g} % slower, one of {len(candidates[world_size])} cases at world size {world_size}: caught "
                  f"in {_percent(caught, args.injected_nights)} of {args.injected_nights} nights; another case red "
                  f"in {_percent(other_red, args.injected_nights)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
