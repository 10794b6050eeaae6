"""Per-pair noise of the paired gate with each noise lever on and off, measured side by side in one run.

Builds the live check's temporary repository (``ci/suite_live_check.py``: ``--cases`` compute cases, a
comment-only commit over a base) and runs A/A paired sessions of it (``--dmlbench-against <base>``),
alternating the settings in a random order per iteration, so that the machine's slow phases fall on both:

* ``pinned``: ``--dmlbench-pin-cores`` on or off (ranks of both sides on the same cores);
* ``canary``: every stage of every session estimated plain and adjusted for the canary read beside each
  block (``--dmlbench-canary``), from the same pairs (no extra session needed).

Sessions run at ``--threshold`` (default 2 %) so that stages take up to 24 pairs: the figures here are the
noise of a pair, not verdicts. Printed per world size and pinning setting: stages, the median per-pair
noise (sd of the log ratio, %) of all stages, and over the stages of at least 8 pairs the median noise plain
and canary-adjusted and the median smallest detectable change both ways.

    python ci/noise_levers.py                                  # world sizes 2 and 4, 2 iterations
    python ci/noise_levers.py --world-sizes 4 --iterations 1 --cases 6
"""

from __future__ import annotations

import argparse
import json
import math
import random
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from canary_noise import stage_rows
from paired_detection_quality import git, pytest_run
from suite_live_check import build_repo

from pytest_dmlbench.gates.paired.statistics import log_ratios


def plain_noise(document: dict[str, Any]) -> list[float]:
    """The per-pair noise (%) of ``step_time_s`` in every stage of at least 4 pairs."""
    noise = []
    for case in document.get("cases", []):
        for stage in ((case.get("extra") or {}).get("paired") or {}).get("block_medians") or []:
            a, b = stage.get("a", {}).get("step_time_s"), stage.get("b", {}).get("step_time_s")
            if not a or not b:
                continue
            values, dropped = log_ratios(a, b, "lower")
            if not dropped and len(values) >= 4:
                noise.append(100.0 * (math.exp(statistics.stdev(values)) - 1.0))
    return noise


def summarize(report: dict[str, Any]) -> None:
    for ws, sessions in report["world_sizes"].items():
        for pinned in (False, True):
            mine = [s for s in sessions if s["pinned"] == pinned]
            if not mine:
                continue
            noise = [n for s in mine for n in s["plain_noise"]]
            rows = [r for s in mine for r in s["rows"] if r["metric"] == "step_time_s"]
            setting = f"world size {ws}, pinned {'on' if pinned else 'off'}: {len(mine)} sessions"
            line = (f"{setting}, {len(noise)} stages, per-pair noise median {statistics.median(noise):.2f} %"
                    if noise else f"{setting}, no stages")
            if rows:
                def med(key: str, rows: list[dict[str, Any]] = rows) -> float:
                    return statistics.median(r[key] for r in rows)
                line += (f"; {len(rows)} stages of 8+ pairs: noise plain {med('plain_noise'):.2f} %, canary-adjusted "
                         f"{med('adjusted_noise'):.2f} %; detectable plain {med('plain_detectable'):.2f} %, adjusted "
                         f"{med('adjusted_detectable'):.2f} %")
            print(line)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--world-sizes", type=int, nargs="+", default=[2, 4])
    parser.add_argument("--iterations", type=int, default=2, help="sessions per setting and world size")
    parser.add_argument("--cases", type=int, default=12)
    parser.add_argument("--threshold", type=float, default=2.0)
    parser.add_argument("--out", type=Path, default=Path("noise_levers.json").resolve())
    parser.add_argument("--summarize", type=Path, metavar="JSON", help="only summarise a JSON this script wrote")
    args = parser.parse_args()
    if args.summarize is not None:
        summarize(json.loads(args.summarize.read_text()))
        return
    report: dict[str, Any] = {"args": {k: str(v) for k, v in vars(args).items()}, "world_sizes": {}}
    with tempfile.TemporaryDirectory(prefix="dmlbench-levers-") as name:
        tmp = Path(name)
        repo = tmp / "repo"
        repo.mkdir()
        commits = build_repo(repo, args.cases, 0.0)
        git(repo, "checkout", "-q", commits["aa"])
        for ws in args.world_sizes:
            sessions: list[dict[str, Any]] = []
            report["world_sizes"][str(ws)] = sessions
            for index in range(args.iterations):
                settings = [False, True]
                random.shuffle(settings)
                for pinned in settings:
                    out = tmp / f"ws{ws}-{index}-{'pinned' if pinned else 'loose'}.json"
                    command = ["--dmlbench", "--world-size", str(ws), "--dmlbench-against", commits["base"],
                               "--dmlbench-threshold", f"{args.threshold:g}", "--dmlbench-json", str(out)]
                    wall, rc, text = pytest_run(repo, command + (["--dmlbench-pin-cores"] if pinned else []))
                    if not out.exists():
                        raise SystemExit(f"session wrote no results (exit {rc}):\n{text[-3000:]}")
                    document = json.loads(out.read_text())
                    sessions.append({"pinned": pinned, "index": index, "exit": rc, "wall_s": wall,
                                     "plain_noise": plain_noise(document), "rows": stage_rows(document)})
                    print(f"ws{ws} pinned {'on' if pinned else 'off'} session {index + 1}/{args.iterations}: "
                          f"exit {rc}, {wall:.0f} s", flush=True)
                    args.out.write_text(json.dumps(report, indent=1))
    summarize(report)
    print(f"written {args.out}")


if __name__ == "__main__":
    main()
