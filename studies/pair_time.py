"""Where a paired run's block pairs spent their time, and what that time settled.

    python -m studies.pair_time RESULTS.json[.gz] [--top 25]

RESULTS is a results file of a paired run (``--dmlbench-against``; the nightly's, or a recording in
``studies/recordings/``). Printed: the cases heaviest first (``--top`` of them), each with its seconds of block
pairs (``extra.paired.seconds``), their running share of the run's, the most pairs any of its figures had and
how many of its judged figures settled; then the cases whose judged figures are all memory peaks, which more pairs
on the same worlds cannot settle while the gate allows for the offset between worlds (``--dmlbench-redraw-worlds``
can), with the seconds they took. This is where a shorter night has to come from.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pytest_dmlbench.gates.figures import MEMORY_PEAK_METRICS
from pytest_dmlbench.gates.paired.recorded import read_results_file
from pytest_dmlbench.results.settled import SETTLED_KINDS


@dataclass(frozen=True)
class CasePairs:
    """One case's block pairs: their seconds, the most pairs a figure had, its judged and settled figures."""

    nodeid: str
    seconds: float
    pairs: int
    judged: int
    settled: int
    memory_only: bool


def case_pairs(document: dict[str, Any]) -> list[CasePairs]:
    """Every case that ran block pairs, heaviest first."""
    rows = []
    for case in document.get("cases", []):
        paired = (case.get("extra") or {}).get("paired")
        if not paired or "seconds" not in paired:
            continue
        judged = [v for v in case.get("verdicts", []) if v.get("kind") != "new"]
        pairs = max(((v.get("paired") or {}).get("pairs", 0) for v in judged), default=0)
        rows.append(CasePairs(
            nodeid=case["nodeid"], seconds=float(paired["seconds"]), pairs=int(pairs), judged=len(judged),
            settled=sum(v.get("kind") in SETTLED_KINDS for v in judged),
            memory_only=bool(judged) and all(v.get("metric") in MEMORY_PEAK_METRICS for v in judged)))
    return sorted(rows, key=lambda row: row.seconds, reverse=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("results", type=Path, help="results JSON of a paired run (.gz allowed)")
    parser.add_argument("--top", type=int, default=25, help="how many of the heaviest cases to list (default 25)")
    args = parser.parse_args(argv)
    if args.top < 0:
        parser.error(f"--top must be >= 0, got {args.top}")
    try:
        rows = case_pairs(read_results_file(args.results))
    except ValueError as exc:
        print(f"pair_time: {exc}", file=sys.stderr)
        return 2
    if not rows:
        print(f"pair_time: {args.results} holds no case with block pairs; give the results file of a paired run "
              "(--dmlbench-against REF)", file=sys.stderr)
        return 1
    total = sum(row.seconds for row in rows)
    print(f"{len(rows)} cases ran block pairs for {total:.0f} s")
    print(f"{'seconds':>8s} {'share':>6s} {'pairs':>5s} {'settled':>8s}  case")
    running = 0.0
    for row in rows[:args.top]:
        running += row.seconds
        print(f"{row.seconds:8.0f} {100 * running / total:5.1f}% {row.pairs:5d} {row.settled:3d} of {row.judged:<2d}  "
              f"{row.nodeid}")
    memory = [row for row in rows if row.memory_only]
    spent = sum(row.seconds for row in memory)
    print(f"cases whose judged figures are all memory peaks: {len(memory)}, {spent:.0f} s of pairs "
          f"({100 * spent / total:.1f} %), {sum(row.settled for row in memory)} of "
          f"{sum(row.judged for row in memory)} figures settled")
    for row in memory:
        print(f"    {row.seconds:6.0f} s  {row.pairs} pairs  {row.nodeid}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
