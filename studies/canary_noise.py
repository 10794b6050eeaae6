"""Per-pair noise with and without the canary adjustment, from the same recorded pairs.

    python -m studies.canary_noise RESULTS.json [RESULTS.json ...]

RESULTS are results files of paired runs (``--dmlbench-against``) made since the gate reads a canary beside
every block (``extra.paired.block_medians[].canary``). Every stage of every timed figure judged on its ratio
with at least ``MIN_ADJUSTED_PAIRS`` pairs is estimated both ways, plain and adjusted
(``gates/paired/canary_adjustment.py``), so the two figures come from one run, pair for pair. Printed per
world size: the median per-pair noise and the median smallest detectable change each way, how often the
adjustment narrowed the test, and the correlation of the figure's log ratios with the canary's. On
unchanged code (an A/A run) the adjustment is worth keeping when it lowers the detectable change; the
level of the test is exact either way (tests/gates/paired/test_canary_adjustment.py).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any

from pytest_dmlbench.gates.figures import SINGLE_READING_METRICS
from pytest_dmlbench.gates.paired.canary_adjustment import MIN_ADJUSTED_PAIRS, adjusted_estimate, canary_logs
from pytest_dmlbench.gates.paired.statistics import estimate, pair_values, scale_for
from pytest_dmlbench.results.student_t import DEFAULT_ALPHA


def stage_rows(document: dict[str, Any]) -> list[dict[str, Any]]:
    """One row per (case, figure, stage) that both estimates exist for."""
    rows = []
    for case in document.get("cases", []):
        paired = (case.get("extra") or {}).get("paired") or {}
        for stage in paired.get("block_medians") or []:
            canary = stage.get("canary") or {}
            c = canary_logs(canary.get("a", []), canary.get("b", []))
            if c is None:
                continue
            for name, metric in case.get("metrics", {}).items():
                better, unit = metric.get("better"), metric.get("unit", "")
                if better not in ("higher", "lower") or name in SINGLE_READING_METRICS or scale_for(unit) != "ratio":
                    continue
                a, b = stage.get("a", {}).get(name), stage.get("b", {}).get(name)
                if not a or not b or len(a) != len(c):
                    continue
                d, dropped = pair_values(a, b, better, "ratio")
                if dropped or len(d) < MIN_ADJUSTED_PAIRS:
                    continue
                plain, adjusted = estimate(d, DEFAULT_ALPHA), adjusted_estimate(d, c, DEFAULT_ALPHA)
                if plain is None or adjusted is None:
                    continue
                rows.append({"nodeid": case["nodeid"], "metric": name, "world_size": case.get("world_size"),
                             "pairs": len(d), "plain_noise": plain.noise_pct, "adjusted_noise": adjusted.noise_pct,
                             "plain_detectable": plain.detectable_pct(),
                             "adjusted_detectable": adjusted.detectable_pct(),
                             "correlation": _correlation(d, c)})
    return rows


def _correlation(x: list[float], y: list[float]) -> float:
    try:
        return statistics.correlation(x, y)
    except statistics.StatisticsError:
        return float("nan")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("results", nargs="+", type=Path)
    args = parser.parse_args(argv)
    rows: list[dict[str, Any]] = []
    for path in args.results:
        try:
            rows += stage_rows(json.loads(path.read_text()))
        except (OSError, ValueError) as exc:
            print(f"canary_noise: {path}: not a readable results file ({exc})", file=sys.stderr)
            return 2
    if not rows:
        print("canary_noise: no stage with a recorded canary and at least "
              f"{MIN_ADJUSTED_PAIRS} pairs (results of a paired run made with the canary?)", file=sys.stderr)
        return 2
    by_size: dict[Any, list[dict[str, Any]]] = defaultdict(list)
    for row in rows:
        by_size[row["world_size"]].append(row)
    for size, group in sorted(by_size.items(), key=lambda kv: str(kv[0])):
        narrower = sum(1 for r in group if r["adjusted_detectable"] < r["plain_detectable"])
        print(f"world size {size}: {len(group)} stages ({len({r['nodeid'] for r in group})} cases, "
              f"median {statistics.median(r['pairs'] for r in group):g} pairs)")
        for key, label in (("noise", "per-pair noise"), ("detectable", "smallest detectable change")):
            plain = statistics.median(r[f"plain_{key}"] for r in group)
            adjusted = statistics.median(r[f"adjusted_{key}"] for r in group)
            print(f"  {label}: plain {plain:.2f} %, adjusted {adjusted:.2f} % (medians)")
        print(f"  adjustment narrowed the test in {narrower} of {len(group)} stages; correlation of the figure's "
              f"log ratio with the canary's: median {statistics.median(r['correlation'] for r in group):.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
