"""Per-pair noise of the paired gate with each noise lever on and off, measured side by side in one run.

Builds the live check's temporary repository (``studies/suite_live_check.py``: ``--cases`` compute cases, a
comment-only commit over a base) and runs A/A paired sessions of it (``--dmlbench-against <base>``), one
per setting and iteration, the settings in a random order per iteration, so that the machine's slow phases
fall on all of them:

* ``base``: the defaults (blocks of 0.2 s, 2 untimed rounds before each block, ranks not pinned);
* ``pinned``: ``--dmlbench-pin-cores`` (ranks of both sides on the same cores);
* ``long-blocks``: ``--dmlbench-block-seconds 0.6`` (three times the measured time per block);
* ``no-warmup`` / ``long-warmup``: ``--dmlbench-block-warmup 0`` / ``10``;
* ``canary-during``: ``--dmlbench-canary during`` (the canary read during each block, not beside it; its
  column "canary-adjusted" is then the adjustment for the canary inside blocks);
* ``few-rounds``: ``--dmlbench-block-min-rounds 2 --dmlbench-block-warmup 1`` (a slow step's block: 2 timed
  rounds after 1 untimed, not 5 after 2; a step under 0.04 s keeps its 0.2 s of rounds, with 1 warm-up round).

With ``--shipped -k EXPR`` the sessions run this repository's own ``bench_cases`` selected by ``EXPR`` (a
scratch clone plus a comment-only commit, ``HEAD`` against ``HEAD~1``, the clone's plugin first on
``PYTHONPATH`` as the nightly runs it), CPU time judged at ``--threshold`` too so that its pairs are recorded,
and every timed figure of the block pairs is summarised (``--metrics``), so that the levers are measured on
the cases that set a night's noise.

Two levers need no session of their own; every stage of every session is estimated three ways from the
same pairs: plain, adjusted for the canary read beside each block (``--dmlbench-canary``), and adjusted for
the block order (which side ran first in each pair, drawn at random: the intercept of the log ratios on the
order, the estimate of a balanced order).

Sessions run at ``--threshold`` (default 2 %) so that stages take up to 24 pairs: the figures here are the
noise of a pair, not verdicts. Printed per world size and setting: stages, the median per-pair noise (sd of
the log ratio, %) over all stages, the median seconds per pair, and the noise per second of pairs
(noise x sqrt(seconds per pair): what decides the pairs a budget buys, so longer blocks are compared
fairly); over the stages of at least 8 pairs, the median noise plain, canary-adjusted and order-adjusted.

    python -m studies.noise_levers                                        # every setting, world sizes 2 and 4
    python -m studies.noise_levers --world-sizes 4 --settings base long-blocks no-warmup --iterations 2
    python -m studies.noise_levers --shipped -k "training_steps or strategy_accounting" --world-sizes 4 \
        --settings base pinned canary-during --iterations 1 --metrics step_time_s cpu_time_s
    python -m studies.noise_levers --summarize noise_levers.json
"""

from __future__ import annotations

import argparse
import json
import math
import random
import statistics
import tempfile
from pathlib import Path
from typing import Any

from pytest_dmlbench.gates.paired.canary_adjustment import MIN_ADJUSTED_PAIRS, adjusted_estimate, canary_logs
from pytest_dmlbench.gates.paired.statistics import estimate, log_ratios
from pytest_dmlbench.results.student_t import DEFAULT_ALPHA
from studies.scratch_repo import aa_clone, git, pytest_run
from studies.suite_live_check import build_repo

SETTINGS: dict[str, list[str]] = {
    "base": [],
    "pinned": ["--dmlbench-pin-cores"],
    "long-blocks": ["--dmlbench-block-seconds", "0.6"],
    "no-warmup": ["--dmlbench-block-warmup", "0"],
    "long-warmup": ["--dmlbench-block-warmup", "10"],
    "canary-during": ["--dmlbench-canary", "during"],
    "few-rounds": ["--dmlbench-block-min-rounds", "2", "--dmlbench-block-warmup", "1"],
}
METRIC = "step_time_s"


def stage_noise(document: dict[str, Any], metrics: tuple[str, ...] = (METRIC,)) -> list[dict[str, Any]]:
    """Per stage and figure of ``metrics`` with at least 4 usable pairs: the figure, the case, its pairs, the
    plain per-pair noise (%), the seconds per pair of its case and, from 8 pairs, the noise adjusted for the
    canary and for the order."""
    rows = []
    for case in document.get("cases", []):
        paired = (case.get("extra") or {}).get("paired") or {}
        total_pairs = sum(paired.get("pairs_per_stage") or [])
        pair_s = paired.get("seconds", math.nan) / total_pairs if total_pairs else math.nan
        for stage in paired.get("block_medians") or []:
            for metric in metrics:
                row = _stage_row(stage, metric, pair_s)
                if row is not None:
                    rows.append({"metric": metric, "nodeid": case.get("nodeid"), **row})
    return rows


SETTLED_KINDS = ("unchanged", "regression", "improvement")


def case_costs(document: dict[str, Any]) -> list[dict[str, Any]]:
    """Per case of a session: its seconds of block pairs, its pairs per stage, how many of its judged figures
    settled (a verdict of unchanged, regression or improvement) and how many were judged."""
    rows = []
    for case in document.get("cases", []):
        paired = (case.get("extra") or {}).get("paired") or {}
        kinds = [verdict.get("kind") for verdict in case.get("verdicts", [])]
        rows.append({"nodeid": case.get("nodeid"), "seconds": paired.get("seconds", 0.0) or 0.0,
                     "pairs_per_stage": paired.get("pairs_per_stage") or [],
                     "settled": sum(kind in SETTLED_KINDS for kind in kinds), "judged": len(kinds)})
    return rows


def _stage_row(stage: dict[str, Any], metric: str, pair_s: float) -> dict[str, Any] | None:
    """One stage's noise of ``metric`` (None with fewer than 4 usable pairs)."""
    a, b = stage.get("a", {}).get(metric), stage.get("b", {}).get(metric)
    if not a or not b:
        return None
    values, dropped = log_ratios(a, b, "lower")
    if dropped or len(values) < 4:
        return None
    plain = estimate(values, DEFAULT_ALPHA)
    if plain is None:
        return None
    row: dict[str, Any] = {"pairs": len(values), "plain": plain.noise_pct, "pair_s": pair_s}
    if len(values) >= MIN_ADJUSTED_PAIRS:
        canary = stage.get("canary") or {}
        c = canary_logs(canary.get("a", []), canary.get("b", []))
        by_canary = None if c is None else adjusted_estimate(values, c, DEFAULT_ALPHA)
        order = [0.5 if first else -0.5 for first in stage.get("a_first", [])]
        by_order = adjusted_estimate(values, order, DEFAULT_ALPHA) if len(order) == len(values) else None
        row["canary"] = None if by_canary is None else by_canary.noise_pct
        row["order"] = None if by_order is None else by_order.noise_pct
    return row


def _setting(session: dict[str, Any]) -> str:
    """A session's setting (files written before the settings were named had a ``pinned`` flag)."""
    return session.get("setting") or ("pinned" if session.get("pinned") else "base")


def summarize(report: dict[str, Any]) -> None:
    metrics = sorted({r.get("metric", METRIC) for sessions in report["world_sizes"].values()
                      for s in sessions for r in s.get("stages", [])})
    for ws, sessions in report["world_sizes"].items():
        for metric in metrics:
            for setting in SETTINGS:
                mine = [s for s in sessions if _setting(s) == setting]
                rows = [r for s in mine for r in s.get("stages", []) if r.get("metric", METRIC) == metric]
                if rows:
                    print(_summary_line(f"world size {ws}, {metric}, {setting}", len(mine), rows))
        for setting in SETTINGS:
            costs = [c for s in sessions if _setting(s) == setting for c in s.get("cases", [])]
            if costs:
                settled, judged = sum(c["settled"] for c in costs), sum(c["judged"] for c in costs)
                print(f"world size {ws}, {setting}: {sum(c['seconds'] for c in costs):.0f} s of block pairs over "
                      f"{len(costs)} case runs, {settled} of {judged} judged figures settled")


def _summary_line(label: str, sessions: int, rows: list[dict[str, Any]]) -> str:
    """The medians of one setting's stages of one figure."""
    noise = statistics.median(r["plain"] for r in rows)
    timed = [r["pair_s"] for r in rows if math.isfinite(r["pair_s"])]
    pair_s = statistics.median(timed) if timed else math.nan
    line = (f"{label}: {sessions} sessions, {len(rows)} stages, per-pair noise median {noise:.2f} %, "
            f"{pair_s:.2f} s a pair, noise per second of pairs {noise * math.sqrt(pair_s):.2f}")
    long = [r for r in rows if r.get("canary") is not None and r.get("order") is not None]
    if long:
        def med(key: str) -> float:
            return float(statistics.median(r[key] for r in long))
        line += (f"; {len(long)} stages of {MIN_ADJUSTED_PAIRS}+ pairs: plain {med('plain'):.2f} %, "
                 f"canary-adjusted {med('canary'):.2f} %, order-adjusted {med('order'):.2f} %")
    return line


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--world-sizes", type=int, nargs="+", default=[2, 4])
    parser.add_argument("--settings", nargs="+", choices=list(SETTINGS), default=list(SETTINGS))
    parser.add_argument("--iterations", type=int, default=2, help="sessions per setting and world size")
    parser.add_argument("--cases", type=int, default=8)
    parser.add_argument("--threshold", type=float, default=2.0)
    parser.add_argument("--out", type=Path, default=Path("noise_levers.json").resolve())
    parser.add_argument("--summarize", type=Path, metavar="JSON", help="only summarise a JSON this script wrote")
    parser.add_argument("--shipped", action="store_true",
                        help="run this repository's bench_cases selected by -k, not the live check's cases")
    parser.add_argument("-k", dest="select", metavar="EXPR", help="with --shipped: the cases (pytest's -k)")
    parser.add_argument("--metrics", nargs="+", default=[METRIC], help="the figures whose noise is summarised")
    parser.add_argument("--pair-budget", type=float, metavar="S",
                        help="seconds of block pairs per case (--dmlbench-pair-budget; default: the plugin's)")
    args = parser.parse_args(argv)
    if args.summarize is not None:
        summarize(json.loads(args.summarize.read_text()))
        return
    if args.shipped and not args.select:
        parser.error("--shipped needs -k EXPR naming the cases (the whole suite takes a night a session)")
    report: dict[str, Any] = {"args": {k: str(v) for k, v in vars(args).items()}, "world_sizes": {}}
    with tempfile.TemporaryDirectory(prefix="dmlbench-levers-") as name:
        tmp = Path(name)
        repo = tmp / "repo"
        env: dict[str, str] = {}
        if args.shipped:
            aa_clone(Path(__file__).resolve().parents[1], repo)
            base = "HEAD~1"
            selection = ["bench_cases", "-k", args.select, "--dmlbench-cpu-threshold", f"{args.threshold:g}"]
            env["PYTHONPATH"] = str(repo)  # the clone's plugin, as the nightly runs its checkout's
        else:
            repo.mkdir()
            commits = build_repo(repo, args.cases, 0.0)
            git(repo, "checkout", "-q", commits["aa"])
            base, selection = commits["base"], []
        budget = [] if args.pair_budget is None else ["--dmlbench-pair-budget", f"{args.pair_budget:g}"]
        for ws in args.world_sizes:
            sessions: list[dict[str, Any]] = []
            report["world_sizes"][str(ws)] = sessions
            for index in range(args.iterations):
                order = list(args.settings)
                random.shuffle(order)
                for setting in order:
                    out = tmp / f"ws{ws}-{index}-{setting}.json"
                    command = ["--dmlbench", "--world-size", str(ws), "--dmlbench-against", base,
                               "--dmlbench-threshold", f"{args.threshold:g}", "--dmlbench-json", str(out),
                               *selection, *SETTINGS[setting], *budget]
                    wall, rc, text = pytest_run(repo, command, 7200, **env)
                    if not out.exists():
                        raise SystemExit(f"session {setting} wrote no results (exit {rc}):\n{text[-3000:]}")
                    sessions.append({"setting": setting, "index": index, "exit": rc, "wall_s": wall,
                                     "stages": stage_noise(document := json.loads(out.read_text()),
                                                           tuple(args.metrics)),
                                     "cases": case_costs(document)})
                    print(f"ws{ws} {setting} session {index + 1}/{args.iterations}: exit {rc}, {wall:.0f} s",
                          flush=True)
                    args.out.write_text(json.dumps(report, indent=1))
    summarize(report)
    print(f"written {args.out}")


if __name__ == "__main__":
    main()
