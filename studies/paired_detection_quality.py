"""Detection quality and cost of the paired gate (``--dmlbench-against``), beside the stored-baseline rule
and pytest-benchmark's ``median:10%`` on the same runs.

Builds a temporary git repository whose library under test has three commits:

* ``base``: a compute-only step (a chain of small matrix products, ``ITERATIONS`` of them);
* ``aa``: the same code with only a comment changed (an A/A comparison: nothing may fail);
* ``slow``: ``ITERATIONS`` raised by 15 %, so every step does 15 % more work (a real code change).

For each world size, a plain session of ``base`` is saved as the stored baseline (``--dmlbench-save``),
then sessions of ``aa`` and of ``slow`` each run ``--dmlbench-against <base>``, and a plain session of
``aa`` (no REF, the default measurement) runs beside them for the cost: the three alternate, so the cost
ratio compares sessions measured side by side. Every case of every paired session is one judged item.
The plain sessions' samples (``aa``) and a plain session of ``slow`` per iteration are judged against the
stored baseline with the stored-baseline rule and with pytest-benchmark's ``median:10%``: those rules
see what a user of them would measure, the default measurement of each case.

    python -m studies.paired_detection_quality                         # 2 x 2 x 10 sessions of 10 cases
    python -m studies.paired_detection_quality --sessions 2 --cases 8  # quicker, coarser
    python -m studies.paired_detection_quality --summarize paired_detection_quality.json  # a saved (or stopped) run

Prints a table and writes ``--out`` (JSON, per item: verdicts, block pairs used, time).
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import tempfile
import textwrap
from pathlib import Path
from typing import Any

from pytest_dmlbench.gates.stored.compare import compare_metric
from pytest_dmlbench.results import RunResults
from studies.scratch_repo import commits_of, git, pytest_run

LIB = textwrap.dedent('''
    """The library under test: one training-like compute step."""

    import torch

    ITERATIONS = {iterations}  # {comment}

    _W = torch.randn(96, 96) / 10


    def step(x):
        for _ in range(ITERATIONS):
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
        dmlbench.pedantic(lib.step, args=(x,), samples_per_call=32 * dist.world_size)
''')
BASE_ITERATIONS = 40


def build_repo(folder: Path, cases: int, slowdown: float) -> dict[str, str]:
    """The three commits (``base``, ``aa``, ``slow``) of the library under test in ``folder``."""
    versions = {}
    for name, iterations, comment in (
        ("base", BASE_ITERATIONS, "products per step"),
        ("aa", BASE_ITERATIONS, "products per step (comment changed only)"),
        ("slow", round(BASE_ITERATIONS * (1 + slowdown)), "products per step"),
    ):
        versions[name] = {"pytest.ini": "[pytest]\n", "test_cases.py": CASES.format(cases=cases),
                          "lib.py": LIB.format(iterations=iterations, comment=comment)}
    return commits_of(folder, versions)


def per_pair_noise(message: str) -> float | None:
    """The per-pair noise (sd of the log ratio, %) a paired verdict states for its deciding stage."""
    found = re.search(r"per-pair noise ([0-9.]+)%", message)
    return float(found.group(1)) if found else None


def stored_verdicts(baseline: RunResults, results: RunResults, threshold: float) -> dict[str, dict[str, bool]]:
    """Per case: did the stored-baseline rule / median:10% flag step_time_s as a regression?"""
    by_id = {c.nodeid: c for c in baseline.cases}
    out = {}
    for case in results.cases:
        base = by_id[case.nodeid].metrics["step_time_s"]
        cur = case.metrics["step_time_s"]
        verdict = compare_metric(base, cur, threshold)
        assert verdict is not None
        ratio = statistics.median(cur.samples) / statistics.median(base.samples)
        out[case.nodeid] = {"stored_rule": verdict.kind == "regression", "median10": ratio > 1.10}
    return out


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--world-sizes", type=int, nargs="+", default=[2, 4])
    parser.add_argument("--sessions", type=int, default=10, help="sessions per way (aa, slow) and world size")
    parser.add_argument("--cases", type=int, default=10, help="cases per session")
    parser.add_argument("--slowdown", type=float, default=0.15)
    parser.add_argument("--threshold", type=float, default=10.0)
    parser.add_argument("--out", type=Path, default=Path("paired_detection_quality.json").resolve())
    parser.add_argument("--summarize", type=Path, metavar="JSON",
                        help="only print the summary of a JSON this script wrote (a stopped run's too)")
    args = parser.parse_args(argv)
    if args.summarize is not None:
        saved = json.loads(args.summarize.read_text())
        for ws, figures in saved["world_sizes"].items():
            print_summary(int(ws), figures["sessions"], figures["items"], figures["stored_items"])
        return
    report: dict[str, Any] = {"args": {k: str(v) for k, v in vars(args).items()}, "world_sizes": {}}
    with tempfile.TemporaryDirectory(prefix="dmlbench-pdq-") as tmp:
        repo = Path(tmp) / "repo"
        repo.mkdir()
        commits = build_repo(repo, args.cases, args.slowdown)
        for ws in args.world_sizes:
            common = ["--dmlbench", "--world-size", str(ws), "--dmlbench-threshold", f"{args.threshold:g}"]
            baseline_dir = Path(tmp) / f"baselines-ws{ws}"
            git(repo, "checkout", "-q", commits["base"])
            _, rc, out = pytest_run(repo, [*common, "--dmlbench-save", "--dmlbench-baseline-dir", str(baseline_dir),
                                           "--dmlbench-json", str(Path(tmp) / "base.json")])
            assert rc == 0, out
            baseline = RunResults.from_dict(json.loads((Path(tmp) / "base.json").read_text()))
            items: list[dict[str, Any]] = []
            stored_items: list[dict[str, Any]] = []
            sessions: list[dict[str, Any]] = []
            for index in range(args.sessions):
                for way in ("aa", "slow"):
                    git(repo, "checkout", "-q", commits[way])
                    json_path = Path(tmp) / f"{way}-{ws}-{index}.json"
                    wall, rc, out = pytest_run(repo, [*common, "--dmlbench-against", commits["base"],
                                                      "--dmlbench-json", str(json_path)])
                    if not json_path.exists():
                        raise SystemExit(f"session failed without results (exit {rc}):\n{out[-3000:]}")
                    results = RunResults.from_dict(json.loads(json_path.read_text()))
                    sessions.append({"way": way, "wall_s": wall, "exit": rc, "paired": True})
                    for case in results.cases:
                        paired = case.extra.get("paired", {})
                        kinds = {v.metric: v.kind for v in case.verdicts}
                        step = next((v for v in case.verdicts if v.metric == "step_time_s"), None)
                        items.append({
                            "way": way, "nodeid": case.nodeid, "failed": case.outcome == "failed",
                            "paired_step": kinds.get("step_time_s"), "ratio": step.ratio if step else None,
                            "pairs": sum(paired.get("pairs_per_stage", [])),
                            "stages": len(paired.get("pairs_per_stage", [])), "seconds": paired.get("seconds"),
                            "noise_pct": per_pair_noise(step.message) if step else None,
                        })
                    plain_json = Path(tmp) / f"plain-{way}-{ws}-{index}.json"
                    plain_s, rc, out = pytest_run(repo, [*common, "--dmlbench-json", str(plain_json)])
                    if rc != 0:
                        raise SystemExit(f"plain session failed (exit {rc}):\n{out[-3000:]}")
                    sessions.append({"way": way, "wall_s": plain_s, "exit": rc, "paired": False})
                    plain = RunResults.from_dict(json.loads(plain_json.read_text()))
                    for nodeid, verdicts in stored_verdicts(baseline, plain, args.threshold).items():
                        stored_items.append({"way": way, "nodeid": nodeid, **verdicts})
                    print(f"ws{ws} {way} session {index + 1}/{args.sessions}: paired {wall:.0f} s (exit {rc}), "
                          f"plain {plain_s:.0f} s", flush=True)
                    report["world_sizes"][str(ws)] = {"sessions": sessions, "items": items,
                                                      "stored_items": stored_items}
                    args.out.write_text(json.dumps(report, indent=1))  # after every session: partial runs count
            print_summary(ws, sessions, items, stored_items)
    print(f"written {args.out}")


def rate(items: list[dict[str, Any]], key: str) -> str:
    hits = sum(1 for i in items if i[key])
    return f"{hits}/{len(items)} = {100.0 * hits / max(1, len(items)):.1f} %"


def print_summary(ws: int, sessions: list[dict[str, Any]], items: list[dict[str, Any]],
                  stored_items: list[dict[str, Any]]) -> None:
    aa = [i for i in items if i["way"] == "aa"]
    slow = [i for i in items if i["way"] == "slow"]
    s_aa = [i for i in stored_items if i["way"] == "aa"]
    s_slow = [i for i in stored_items if i["way"] == "slow"]
    print(f"\n== world size {ws}: {len(aa)} unchanged items, {len(slow)} items 15 % slower ==")
    print(f"{'rule':<36} {'A/A items failed':<22} {'slowdowns caught':<22}")
    print(f"{'paired gate (item fails)':<36} {rate(aa, 'failed'):<22} {rate(slow, 'failed'):<22}")
    print(f"{'stored-baseline rule (saved 1x)':<36} {rate(s_aa, 'stored_rule'):<22} {rate(s_slow, 'stored_rule'):<22}")
    print(f"{'pytest-benchmark median:10%':<36} {rate(s_aa, 'median10'):<22} {rate(s_slow, 'median10'):<22}")
    for way, group in (("aa", aa), ("slow", slow)):
        pairs = sorted(i["pairs"] for i in group)
        ratios = [i["ratio"] for i in group if i["ratio"]]
        paired = [s["wall_s"] for s in sessions if s["way"] == way and s["paired"]]
        plain = [s["wall_s"] for s in sessions if s["way"] == way and not s["paired"]]
        side_by_side = [p / q for p, q in zip(paired, plain, strict=False)]
        noise = [i["noise_pct"] for i in group if i.get("noise_pct") is not None]
        if noise:
            print(f"{way}: per-pair noise (sd of the log ratio) median {statistics.median(noise):.1f} %, "
                  f"quartiles {[round(q, 1) for q in statistics.quantiles(noise, n=4)] if len(noise) > 1 else noise}")
        if pairs:
            quart = statistics.quantiles(pairs, n=4) if len(pairs) > 1 else [pairs[0]] * 3
            print(f"{way}: block pairs per item min {pairs[0]}, quartiles {quart}, max {pairs[-1]}; "
                  f"confirmation stages {sum(1 for i in group if i['stages'] > 1)}; "
                  f"median estimated ratio {statistics.median(ratios) if ratios else float('nan'):.3f}; "
                  f"session wall median {statistics.median(paired):.0f} s paired, {statistics.median(plain):.0f} s "
                  f"plain; cost (paired / plain session beside it) median {statistics.median(side_by_side):.2f}x, "
                  f"range {min(side_by_side):.2f}-{max(side_by_side):.2f}x")


if __name__ == "__main__":
    main()
