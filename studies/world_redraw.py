"""Does a world keep a speed of its own for as long as it lives? A/A paired sessions with worlds kept and redrawn.

Clones this repository's HEAD, adds a comment-only commit and runs A/A paired sessions of the selected
benchmark cases at world size 4 (``--dmlbench-against HEAD~1``), one per entry of ``--settings``: each entry is
a ``--dmlbench-redraw-worlds`` value (0: each block server keeps its world all run; K: both sides start fresh
worlds for a case's warm-up and every K pairs). The entries run in the order given, so ``0 4 4 0`` puts the
machine's slow phases on both settings alike. Sessions run at ``--threshold`` (default 2 %) and a pair budget,
so that stages take many pairs: the figures here are offsets and noise, not verdicts.

Per session, from its results file (every stage's pairs of ``step_time_s``, in order):

* per-pair noise (sd of the log ratio A/B, %, median over cases) and seconds per pair (median);
* the offset the two sides keep for a whole case: the covariance, across cases, of the means of each case's
  first and second half of pairs (``studies/server_offset.py``), as a spread in % with a bootstrap 95 % upper bound.
  With worlds kept, it holds what a world and what a server keep; with worlds redrawn, only what a server keeps;
* with worlds redrawn, the offset one world has: per case a one-way random-effects analysis of the pairs
  grouped by world (between-world mean square less within, over the effective group size), averaged over
  cases, as a spread in %, with a bootstrap 95 % upper bound;
* with worlds kept, the same analysis over consecutive pairs grouped as if worlds had been redrawn every
  ``--control-groups`` pairs (default 2): the control, which reads about zero unless neighbouring pairs share
  something besides their world (a slow phase of the machine).

    python -m studies.world_redraw --select bench_cases/test_collectives.py --settings 0 4 4 0 --out-dir redraw
    python -m studies.world_redraw --summarize redraw/*.json
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from studies.scratch_repo import aa_clone
from studies.server_offset import BOOTSTRAP, halves, shared_offset

FIGURE = "step_time_s"
MIN_PAIRS = 8


def case_worlds(document: dict[str, Any], figure: str = FIGURE) -> dict[str, list[list[float]]]:
    """Per case with at least ``MIN_PAIRS`` usable pairs: its log ratios A/B over all stages in order, split
    into one list per world (a pair whose blocks ran on fresh worlds starts a new one)."""
    out: dict[str, list[list[float]]] = {}
    for case in document.get("cases", []):
        paired = (case.get("extra") or {}).get("paired") or {}
        worlds: list[list[float]] = []
        for stage in paired.get("block_medians") or []:
            a, b = stage.get("a", {}).get(figure), stage.get("b", {}).get(figure)
            if not a or not b:
                continue
            fresh = stage.get("fresh_world") or [False] * len(a)
            for x, y, new in zip(a, b, fresh, strict=True):
                if new or not worlds:
                    worlds.append([])
                if x and y and x > 0 and y > 0 and math.isfinite(x) and math.isfinite(y):
                    worlds[-1].append(math.log(x / y))
        worlds = [w for w in worlds if w]
        if sum(map(len, worlds)) >= MIN_PAIRS:
            out[case["nodeid"]] = worlds
    return out


def world_variance(worlds: list[list[float]]) -> float | None:
    """The between-world variance component of one case (one-way random effects, unequal groups); None with
    fewer than two worlds of two pairs or more."""
    groups = [w for w in worlds if len(w) >= 2]
    if len(groups) < 2:
        return None
    n = sum(map(len, groups))
    grand = statistics.fmean([v for g in groups for v in g])
    between = sum(len(g) * (statistics.fmean(g) - grand) ** 2 for g in groups) / (len(groups) - 1)
    within = sum((v - statistics.fmean(g)) ** 2 for g in groups for v in g) / (n - len(groups))
    n0 = (n - sum(len(g) ** 2 for g in groups) / n) / (len(groups) - 1)
    return (between - within) / n0


def world_spread(components: list[float], rng: random.Random) -> tuple[float, float]:
    """The spread (%) of a world's offset from per-case variance components, with a bootstrap 95 % upper bound."""
    means = sorted(statistics.fmean([rng.choice(components) for _ in components]) for _ in range(BOOTSTRAP))
    return (100 * math.sqrt(max(0.0, statistics.fmean(components))),
            100 * math.sqrt(max(0.0, means[int(0.95 * BOOTSTRAP)])))


def summarize(paths: list[Path], seed: int = 0, control_groups: int = 2) -> list[str]:
    """One block of lines per session file."""
    rng = random.Random(seed)
    lines = []
    for path in paths:
        document = json.loads(path.read_text())
        session = document.get("session_note") or {}
        cases = case_worlds(document)
        flat = {k: [v for w in ws for v in w] for k, ws in cases.items()}
        noise = [100 * statistics.stdev(v) for v in flat.values()]
        per_pair = []
        for case in document.get("cases", []):
            paired = (case.get("extra") or {}).get("paired") or {}
            pairs = sum(paired.get("pairs_per_stage") or [])
            if pairs and case["nodeid"] in cases:
                per_pair.append(float(paired.get("seconds") or 0.0) / pairs)
        options = "".join(f" {option}" for option in session.get("extra", []))
        head = (f"{path.name}: redraw every {session.get('redraw', '?')} pair(s){options}, "
                f"{session.get('wall_s', math.nan):.0f} s, {len(cases)} cases of {MIN_PAIRS}+ pairs")
        if not cases:
            lines.append(head + ": none")
            continue
        lines.append(head + f"; per-pair noise median {statistics.median(noise):.2f} %, "
                     f"{statistics.median(per_pair):.2f} s a pair")
        if len(cases) >= 4:
            lines.append(f"  kept for a whole case (halves): {shared_offset(halves(flat), rng).text()}")
        components = [c for ws in cases.values() if (c := world_variance(ws)) is not None]
        if components:
            spread, upper = world_spread(components, rng)
            worlds = statistics.median(len(ws) for ws in cases.values())
            lines.append(f"  kept by one world (between worlds, {len(components)} cases, median {worlds:g} worlds "
                         f"a case): spread {spread:.2f} % (95 % upper bound {upper:.2f} %)")
        elif control_groups > 0:
            grouped = [[v[i:i + control_groups] for i in range(0, len(v), control_groups)] for v in flat.values()]
            control = [c for ws in grouped if (c := world_variance(ws)) is not None]
            if control:
                spread, upper = world_spread(control, rng)
                lines.append(f"  control, consecutive pairs of one kept world in groups of {control_groups} "
                             f"({len(control)} cases): spread {spread:.2f} % (95 % upper bound {upper:.2f} %)")
    return lines


def run_session(clone: Path, select: list[str], redraw: int, threshold: float, budget: float,
                out: Path, extra: list[str]) -> float:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(clone), env.get("PYTHONPATH")]))
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:randomly", *select,
               "--dmlbench", "--world-size", "4", "--dmlbench-against", "HEAD~1",
               "--dmlbench-threshold", f"{threshold:g}", "--dmlbench-pair-budget", f"{budget:g}",
               "--dmlbench-redraw-worlds", str(redraw), "--dmlbench-json", str(out), *extra]
    begin = time.monotonic()
    done = subprocess.run(command, cwd=clone, env=env, capture_output=True, text=True, timeout=7200)
    wall = time.monotonic() - begin
    if not out.exists():
        raise SystemExit(f"world_redraw: the session wrote no results (exit {done.returncode}):\n"
                         f"{(done.stdout + done.stderr)[-3000:]}")
    document = json.loads(out.read_text())
    document["session_note"] = {"redraw": redraw, "wall_s": wall, "exit": done.returncode, "extra": extra}
    out.write_text(json.dumps(document))
    return wall


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--select", nargs="+", default=["bench_cases/test_collectives.py"],
                        help="test files or node ids to run (default bench_cases/test_collectives.py)")
    parser.add_argument("--settings", nargs="+", type=int, default=[0, 4, 4, 0],
                        help="--dmlbench-redraw-worlds per session, in order (default 0 4 4 0)")
    parser.add_argument("--threshold", type=float, default=2.0)
    parser.add_argument("--pair-budget", type=float, default=20.0, help="seconds of pairs per case and stage")
    parser.add_argument("--extra", default="", help="more options for every session, e.g. "
                        "--extra=--dmlbench-mmap-threshold=131072")
    parser.add_argument("--out-dir", type=Path, default=None, help="where the session files go (default: a temp dir)")
    parser.add_argument("--summarize", nargs="+", type=Path, metavar="JSON", help="only summarize these files")
    parser.add_argument("--control-groups", type=int, default=2,
                        help="kept-world sessions: group consecutive pairs by this many for the control (default 2)")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    if args.summarize:
        print("\n".join(summarize(args.summarize, args.seed, args.control_groups)))
        return 0
    if any(k < 0 for k in args.settings):
        parser.error(f"--settings {args.settings}: each is a number of pairs >= 0")
    out_dir = args.out_dir or Path(tempfile.mkdtemp(prefix="world-redraw-"))
    out_dir.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="world-redraw-clone-") as scratch:
        clone = aa_clone(Path(__file__).resolve().parents[1], Path(scratch) / "repo")
        files = []
        for index, redraw in enumerate(args.settings):
            out = out_dir / f"session{index}-redraw{redraw}.json"
            wall = run_session(clone, args.select, redraw, args.threshold, args.pair_budget, out.resolve(),
                               args.extra.split())
            print(f"session {index}: redraw {redraw}, {wall:.0f} s -> {out}", flush=True)
            files.append(out)
    print("\n".join(summarize(files, args.seed, args.control_groups)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
