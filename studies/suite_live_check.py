"""Live check of the suite-level gate: dozens of cases, one night at a time, judged as a whole.

Builds a temporary git repository of ``--cases`` compute cases (each its own chain of small matrix products,
``lib.step_<k>``) with three commits:

* ``base``: every case at ``BASE_ITERATIONS`` products per step;
* ``aa``: a comment changed, nothing else (a quiet night: the whole run must pass);
* ``one_slow``: the first ``--slowed`` cases (case 0 alone by default) do ``--slowdown`` more work per step
  (10 % by default), every other case unchanged (the night must fail the slowed cases and nothing else; with
  several slowed cases one night counts several trials of the catch rate).

Per world size and iteration it runs a night of ``aa`` and one of ``one_slow``, each
``pytest --dmlbench --world-size N --dmlbench-against <base>`` (the nightly's mode, default settings),
in random order, and a plain session of ``aa`` beside them for the cost. Counted per night: green or red,
which cases failed, which slowed cases were caught, and the wall time over the plain session's.

    python -m studies.suite_live_check                                  # 3 iterations at world sizes 2 and 4
    python -m studies.suite_live_check --world-sizes 4 --iterations 1   # one pair of nights
    python -m studies.suite_live_check --summarize suite_live_check.json
    python -m studies.suite_live_check --keep-results nights/ --extra=--dmlbench-canary=on   # keep each night's JSON
    python -m studies.suite_live_check --world-sizes 4 --slowed 12 --extra=--dmlbench-threshold=7   # catch rate at 7 %

Writes ``--out`` (JSON) after every night, so a stopped run still counts.
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import statistics
import subprocess
import tempfile
import textwrap
from pathlib import Path
from typing import Any

from studies.scratch_repo import commits_of, git, pytest_run

BASE_ITERATIONS = 40
LIB_HEAD = textwrap.dedent('''
    """The library under test: one compute step per case."""

    import torch

    _W = torch.randn(96, 96) / 10
    # {comment}
''')
LIB_STEP = textwrap.dedent('''

    def step_{k}(x):
        for _ in range({iterations}):
            x = torch.tanh(x @ _W)
        return x
''')
CASES = textwrap.dedent('''
    import pytest
    import torch

    import lib


    @pytest.mark.dmlbench
    @pytest.mark.parametrize("case", range({cases}))
    def test_step(dist, dmlbench, case):
        x = torch.randn(32, 96)
        dmlbench.pedantic(getattr(lib, f"step_{{case}}"), args=(x,), samples_per_call=32 * dist.world_size)
''')
def slowed_ids(slowed: int) -> list[str]:
    """The node ids (from the repository root) of the slowed cases."""
    return [f"test_cases.py::test_step[{k}]" for k in range(slowed)]


def library(cases: int, slowed: int, slowed_iterations: int, comment: str) -> str:
    steps = [LIB_STEP.format(k=k, iterations=slowed_iterations if k < slowed else BASE_ITERATIONS)
             for k in range(cases)]
    return LIB_HEAD.format(comment=comment) + "".join(steps)


def build_repo(folder: Path, cases: int, slowdown: float, slowed: int = 1) -> dict[str, str]:
    """The three commits (``base``, ``aa``, ``one_slow``) of the cases under test in ``folder``."""
    slowed_iterations = round(BASE_ITERATIONS * (1 + slowdown))
    versions = {}
    for name, iterations, comment in (("base", BASE_ITERATIONS, "base"), ("aa", BASE_ITERATIONS, "comment changed"),
                                      ("one_slow", slowed_iterations, "base")):
        versions[name] = {"pytest.ini": "[pytest]\n", "test_cases.py": CASES.format(cases=cases),
                          "lib.py": library(cases, slowed, iterations, comment)}
    return commits_of(folder, versions)


def night(repo: Path, tmp: Path, common: list[str], base: str, label: str, slowed: int = 1) -> dict[str, Any]:
    """One paired night: exit code, wall time, failed cases, each slowed case's verdict, ratio of medians and
    paired estimate (``slowed``); its results file is ``tmp/<label>.json``."""
    out = tmp / f"{label}.json"
    wall, rc, text = pytest_run(repo, [*common, "--dmlbench-against", base, "--dmlbench-json", str(out)])
    if not out.exists():
        raise SystemExit(f"night {label} wrote no results (exit {rc}):\n{text[-3000:]}")
    cases = json.loads(out.read_text())["cases"]
    failed = sorted(c["nodeid"] for c in cases if c["outcome"] == "failed")
    steps = {}
    for nodeid in slowed_ids(slowed):
        case = next(c for c in cases if c["nodeid"].endswith(nodeid))
        step = next((v for v in case["verdicts"] if v["metric"] == "step_time_s"), None)
        paired = (step or {}).get("paired") or {}
        steps[nodeid] = {"kind": step["kind"] if step else None, "ratio": step["ratio"] if step else None,
                         "estimate": paired.get("estimate")}
    kinds: dict[str, int] = {}
    for case in cases:
        for verdict in case["verdicts"]:
            kinds[verdict["kind"]] = kinds.get(verdict["kind"], 0) + 1
    return {"exit": rc, "wall_s": wall, "failed": failed, "slowed": steps, "verdict_kinds": kinds}


def _is_slowed(nodeid: str, slowed: dict[str, Any]) -> bool:
    return any(nodeid.endswith(s) for s in slowed)


def summarize(report: dict[str, Any]) -> None:
    for ws, nights in report["world_sizes"].items():
        aa = [n for n in nights if n["way"] == "aa"]
        slow = [n for n in nights if n["way"] == "one_slow"]
        green = sum(1 for n in aa if n["exit"] == 0)
        trials = [(nodeid, n) for n in slow for nodeid in n["slowed"]]
        caught = sum(1 for nodeid, n in trials if any(f.endswith(nodeid) for f in n["failed"]))
        alone = sum(1 for n in slow if not any(not _is_slowed(f, n["slowed"]) for f in n["failed"]))
        false_red = sum(len(n["failed"]) for n in aa) + sum(
            sum(1 for f in n["failed"] if not _is_slowed(f, n["slowed"])) for n in slow)
        costs = [n["wall_s"] / n["plain_s"] for n in aa if n.get("plain_s")]
        slowed = [s for n in slow for s in n["slowed"].values()]
        estimates = [s["estimate"] for s in slowed if s["estimate"] is not None]
        ratios = [s["ratio"] for s in slowed if s["ratio"] is not None]
        share = f" ({100 * caught / len(trials):.0f} %)" if trials else ""
        print(f"world size {ws}: {len(aa)} quiet nights, {green} green; {len(slow)} nights with slowed cases: "
              f"{caught} of {len(trials)} slowed cases caught{share}; nights with nothing else red: {alone}; "
              f"unchanged items failed: {false_red}")
        if costs:
            print(f"  cost of a quiet night over the plain session beside it: median {statistics.median(costs):.2f}x "
                  f"({min(costs):.2f}-{max(costs):.2f}x); quiet night wall median "
                  f"{statistics.median(n['wall_s'] for n in aa):.0f} s")
        if estimates:
            print(f"  slowed cases' paired estimates: {', '.join(f'{r:.3f}' for r in sorted(estimates))}")
        if ratios:
            print(f"  slowed cases' ratios of medians: {', '.join(f'{r:.3f}' for r in sorted(ratios))}")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--world-sizes", type=int, nargs="+", default=[2, 4])
    parser.add_argument("--iterations", type=int, default=3, help="pairs of nights (aa, one_slow) per world size")
    parser.add_argument("--cases", type=int, default=24)
    parser.add_argument("--slowdown", type=float, default=0.10)
    parser.add_argument("--slowed", type=int, default=1, help="how many cases the slowed night slows (cases 0..K-1)")
    parser.add_argument("--out", type=Path, default=Path("suite_live_check.json").resolve())
    parser.add_argument("--summarize", type=Path, metavar="JSON", help="only summarise a JSON this script wrote")
    parser.add_argument("--keep-results", type=Path, metavar="DIR",
                        help="keep each paired night's results JSON here (for canary_noise, replay_nights)")
    parser.add_argument("--extra", action="append", default=[], metavar="ARG",
                        help="one more pytest argument for every session (repeatable), e.g. "
                        "--extra=--dmlbench-canary=on")
    args = parser.parse_args(argv)
    if not 1 <= args.slowed < args.cases:
        parser.error(f"--slowed {args.slowed}: give 1 to {args.cases - 1}, so that some cases stay unchanged")
    if args.summarize is not None:
        summarize(json.loads(args.summarize.read_text()))
        return
    report: dict[str, Any] = {"args": {k: str(v) for k, v in vars(args).items()}, "world_sizes": {}}
    with tempfile.TemporaryDirectory(prefix="dmlbench-live-") as name:
        tmp = Path(name)
        repo = tmp / "repo"
        repo.mkdir()
        commits = build_repo(repo, args.cases, args.slowdown, args.slowed)
        for ws in args.world_sizes:
            common = ["--dmlbench", "--world-size", str(ws), *args.extra]
            nights: list[dict[str, Any]] = []
            report["world_sizes"][str(ws)] = nights
            for index in range(args.iterations):
                ways = ["aa", "one_slow"]
                random.shuffle(ways)
                for way in ways:
                    git(repo, "checkout", "-q", commits[way])
                    label = f"{way}-ws{ws}-{index}"
                    found = night(repo, tmp, common, commits["base"], label, args.slowed)
                    record = {"way": way, "index": index, **found}
                    if args.keep_results is not None:
                        args.keep_results.mkdir(parents=True, exist_ok=True)
                        shutil.copyfile(tmp / f"{label}.json", args.keep_results / f"{label}.json")
                    if way == "aa":
                        plain_s, rc, text = pytest_run(repo, common)
                        if rc != 0:
                            raise SystemExit(f"plain session failed (exit {rc}):\n{text[-3000:]}")
                        record["plain_s"] = plain_s
                    nights.append(record)
                    print(f"ws{ws} {way} night {index + 1}/{args.iterations}: exit {record['exit']}, "
                          f"{record['wall_s']:.0f} s, failed {record['failed'] or 'nothing'}", flush=True)
                    args.out.write_text(json.dumps(report, indent=1))
    summarize(report)
    print(f"written {args.out}")


if __name__ == "__main__":
    try:
        main()
    except subprocess.CalledProcessError as exc:
        raise SystemExit(f"git failed: {exc.stderr}") from exc
