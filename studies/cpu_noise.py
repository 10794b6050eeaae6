"""Per-pair noise of CPU time against wall time, on the same block pairs of a paired run.

    python -m studies.cpu_noise RESULTS.json [RESULTS.json ...]

RESULTS are results files of paired runs (``--dmlbench-against``) whose timed cases record ``cpu_time_s`` beside
``step_time_s`` on both sides, made with ``--dmlbench-cpu-threshold`` so that the gate tests both on its block
pairs (``extra.paired.block_medians``). Both figures of a case are read from the same blocks, so the comparison is
pair for pair. Printed per case: the pairs, each figure's per-pair noise (the standard deviation of the log ratio
of A's and B's block medians, in %) and its smallest detectable change at the pairs it had; then per world size the
median of each and the median ratio of wall-time noise to CPU-time noise. On unchanged code (an A/A run) this is
the noise that decides how tight a CPU threshold can settle.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any

from pytest_dmlbench.gates.paired.recorded import read_results_file
from pytest_dmlbench.gates.paired.statistics import estimate, pair_values
from pytest_dmlbench.results.student_t import DEFAULT_ALPHA

WALL, CPU = "step_time_s", "cpu_time_s"


def _pairs(stages: list[dict[str, Any]], name: str) -> tuple[list[float], list[float]]:
    a: list[float] = []
    b: list[float] = []
    for stage in stages:
        sa, sb = stage.get("a", {}).get(name, []), stage.get("b", {}).get(name, [])
        if len(sa) == len(sb):
            a += sa
            b += sb
    return a, b


def case_rows(document: dict[str, Any]) -> list[dict[str, Any]]:
    """One row per case whose block pairs record both figures: each one's noise and detectable change."""
    rows = []
    for case in document.get("cases", []):
        stages = ((case.get("extra") or {}).get("paired") or {}).get("block_medians") or []
        row: dict[str, Any] = {"nodeid": case["nodeid"], "world_size": case.get("world_size")}
        for name in (WALL, CPU):
            d, dropped = pair_values(*_pairs(stages, name), "lower", "ratio")
            est = estimate(d, DEFAULT_ALPHA) if not dropped else None
            if est is None:
                break
            row[name] = (est.pairs, est.noise_pct, est.detectable_pct())
        else:
            rows.append(row)
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("results", nargs="+", type=Path, help="results JSON of paired runs (.gz allowed)")
    args = parser.parse_args(argv)
    rows = []
    for path in args.results:
        try:
            rows += case_rows(read_results_file(path))
        except ValueError as exc:
            print(f"cpu_noise: {exc}", file=sys.stderr)
            return 2
    if not rows:
        print("cpu_noise: no case records both step_time_s and cpu_time_s on block pairs; run the paired gate "
              "with --dmlbench-cpu-threshold against a REF that records cpu_time_s", file=sys.stderr)
        return 1
    print(f"{'case':70s} {'pairs':>5s} {'wall noise':>10s} {'cpu noise':>9s} {'wall detect':>11s} {'cpu detect':>10s}")
    by_size: dict[Any, list[dict[str, Any]]] = defaultdict(list)
    for row in rows:
        by_size[row["world_size"]].append(row)
        (pairs, wall, wall_det), (_, cpu, cpu_det) = row[WALL], row[CPU]
        print(f"{row['nodeid'][-70:]:70s} {pairs:5d} {wall:9.1f}% {cpu:8.1f}% {wall_det:10.1f}% {cpu_det:9.1f}%")
    for size, group in sorted(by_size.items(), key=lambda item: str(item[0])):
        wall_noise = statistics.median(r[WALL][1] for r in group)
        cpu_noise = statistics.median(r[CPU][1] for r in group)
        ratio = statistics.median(r[WALL][1] / r[CPU][1] for r in group if r[CPU][1] > 0)
        print(f"world size {size}: {len(group)} cases; median per-pair noise wall {wall_noise:.1f} %, CPU "
              f"{cpu_noise:.1f} %; wall noise / CPU noise, median over cases {ratio:.1f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
