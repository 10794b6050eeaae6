"""Pool repeated runs of bench_cases/test_collectives.py into one small results file.

Per case (collective, size, world size): one sample per run, that run's median time per operation, and
the algbw of that time (so that algbw x time is still the size); only the metrics the projection reads
are kept, so the projection reads the median of the runs' medians.

    python tests/projection/data/pool_runs.py OUT.json RUN.json [RUN.json ...]
"""

from __future__ import annotations

import json
import statistics
import sys
from pathlib import Path

from pytest_dmlbench.results import CaseResult, MetricResult, RunResults
from pytest_dmlbench.results.jsonio import read_results
from pytest_dmlbench.results.report import write_results


def pool(out: Path, paths: list[Path]) -> int:
    """Write the pooled file to ``out``; returns the number of cases."""
    runs = [read_results(p, "") for p in paths]
    times: dict[tuple[str, int], list[float]] = {}
    sizes: dict[tuple[str, int], list[float]] = {}
    proto: dict[tuple[str, int], CaseResult] = {}
    for run in runs:
        for case in run.cases:
            if case.outcome != "passed":
                continue
            key = (case.nodeid, case.world_size)
            proto.setdefault(key, case)
            t = case.metrics["step_time_s"].samples
            bw = case.metrics["algbw_gbps"].samples
            times.setdefault(key, []).append(statistics.median(t))
            sizes.setdefault(key, []).append(round(statistics.median(b * 1e9 * s for b, s in zip(bw, t, strict=True))))
    cases = []
    for key, case in sorted(proto.items(), key=lambda kv: (kv[0][1], kv[0][0])):
        pooled = CaseResult(case.nodeid, case.params, case.world_size, case.backend)
        pooled.add(MetricResult.of("step_time_s", times[key]))
        pooled.add(MetricResult.of("algbw_gbps", [n / t / 1e9 for n, t in zip(sizes[key], times[key], strict=True)]))
        cases.append(pooled)
    first = runs[0]
    per_world = max(sum(r.run["world_size"] == ws for r in runs) for ws in {r.run["world_size"] for r in runs})
    run_info = {"world_size": max(r.run["world_size"] for r in runs), "xdist_workers": 1,
                "cores": first.run["cores"], "pooled_runs": per_world}
    write_results(out, RunResults(machine=first.machine, created=first.created, run=run_info, cases=cases))
    out.write_text(json.dumps(json.loads(out.read_text()), separators=(",", ":")))  # compact: a shipped file
    return len(cases)


if __name__ == "__main__":
    print(pool(Path(sys.argv[1]), [Path(p) for p in sys.argv[2:]]), "cases")
