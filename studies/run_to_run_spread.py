"""Run-to-run spread of a figure's medians: the same cases run REPEATS times in fresh pytest sessions,
then the coefficient of variation (stddev / mean) of each case's median over those runs, per figure.

    python -m studies.run_to_run_spread --repeats 10 --world-size 4
    python -m studies.run_to_run_spread --repeats 6 --metrics step_time_s cpu_time_s

This is the noise floor any regression threshold of the stored-baseline gate has to clear on this machine
(the sessions, and so the saved baselines, differ by more than the rounds of one session do).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from tabulate import tabulate

DEFAULT_SELECTION = [
    "bench_cases/test_collectives.py::test_collective_bandwidth[all_reduce-4KB]",
    "bench_cases/test_collectives.py::test_collective_bandwidth[all_reduce-16MB]",
    "bench_cases/test_training_benchmarks.py::test_strategy_training[ddp]",
    "bench_cases/test_training_benchmarks.py::test_strategy_training[bucketed]",
]
METRIC = "step_time_s"


def run_session(selection: list[str], world_size: int, out: Path,
                metrics: tuple[str, ...]) -> dict[str, dict[str, float]]:
    """One session of ``selection``: per figure of ``metrics``, each case's median."""
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--dmlbench", "--world-size",
               str(world_size), "--dmlbench-no-compare", "--dmlbench-json", str(out), *selection]
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"pytest failed (exit {done.returncode}):\n{done.stdout[-3000:]}{done.stderr[-2000:]}")
    cases = json.loads(out.read_text())["cases"]
    return {metric: {c["nodeid"]: c["metrics"][metric]["stats"]["median"] for c in cases if metric in c["metrics"]}
            for metric in metrics}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=10)
    parser.add_argument("--world-size", type=int, default=4)
    parser.add_argument("--metrics", nargs="+", default=[METRIC])
    parser.add_argument("cases", nargs="*", default=DEFAULT_SELECTION)
    args = parser.parse_args(argv)
    medians: dict[str, dict[str, list[float]]] = {metric: {} for metric in args.metrics}
    with tempfile.TemporaryDirectory() as folder:
        for i in range(args.repeats):
            session = run_session(args.cases, args.world_size, Path(folder) / f"run{i}.json", tuple(args.metrics))
            for metric, by_case in session.items():
                for nodeid, median in by_case.items():
                    medians[metric].setdefault(nodeid, []).append(median)
            print(f"run {i + 1}/{args.repeats} done", file=sys.stderr)
    for metric, spread in medians.items():
        print(f"{metric}:")
        print(tabulate(spread_rows(spread),
                       headers=["case", "runs", "median ms", "min ms", "max ms", "CV of medians"]))


def spread_rows(medians: dict[str, list[float]]) -> list[list[object]]:
    """Per case (by name, its node id's last part): runs, median, min and max of its medians in ms, and their
    coefficient of variation."""
    rows: list[list[object]] = []
    for nodeid, values in sorted(medians.items()):
        mean = statistics.fmean(values)
        cv = statistics.stdev(values) / mean if len(values) > 1 and mean else float("nan")
        rows.append([nodeid.split("::")[-1], len(values), f"{statistics.median(values) * 1e3:.2f}",
                     f"{min(values) * 1e3:.2f}", f"{max(values) * 1e3:.2f}", f"{100 * cv:.1f}%"])
    return rows


if __name__ == "__main__":
    main()
