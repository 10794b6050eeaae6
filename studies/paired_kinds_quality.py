"""A/A and slowdown figures of the paired gate for the figure kinds it judges beyond step times.

A temporary git repository holds one case per kind: a one-reading figure with +-20 % noise from block to
block (``time_to_accuracy_s``), an in-process figure (``dmlbench_metrics``), a collective's bus bandwidth
(``dmlbench.collective``), and an exposed-communication fraction (judged in percentage points). REF is
its committed code; the working tree either changes a comment only (A/A) or makes every kind worse: the
reading 1.5x, the in-process step 1.5x as long, the collective's buffer copied once more per call, the
fraction up by 20 points. Each session is a real ``pytest --dmlbench --world-size 2 --dmlbench-against
HEAD`` run; counted per kind: A/A sessions with a change verdict (any of regression or improvement), and
slowed sessions whose verdict is a regression; inconclusive verdicts are counted apart.

    python -m studies.paired_kinds_quality --sessions 5      # 5 A/A and 5 slowed sessions: about 4 minutes
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import textwrap
import time
from collections import Counter, defaultdict
from pathlib import Path

from studies.scratch_repo import commits_of

LIB = textwrap.dedent(
    """
    import time

    import torch

    WORSE = 1.0

    def in_process_step():
        time.sleep(0.002 * WORSE)

    def exposed_fraction(rng):
        return min(0.9, 0.2 + (WORSE - 1.0) * 0.4 + rng.uniform(-0.02, 0.02))

    def reading(rng):
        return 10.0 * WORSE * rng.uniform(0.8, 1.2)
    """
)
CASES = textwrap.dedent(
    """
    import random
    import time

    import pytest
    import torch

    import lib

    NOISE = random.SystemRandom()  # the case RNG is seeded per case; this noise differs from block to block

    @pytest.mark.dmlbench(world_size=2)
    def test_one_reading(dist, dmlbench):
        dmlbench(time.sleep, 0.004)
        dmlbench.record("time_to_accuracy_s", lib.reading(NOISE))

    @pytest.mark.dmlbench(world_size=2)
    def test_fraction(dist, dmlbench):
        dmlbench(time.sleep, 0.004)
        dmlbench.record("exposed_comm_fraction", [lib.exposed_fraction(NOISE) for _ in range(10)])

    @pytest.mark.dmlbench(world_size=2)
    def test_collective(dist, dmlbench):
        if lib.WORSE > 1.0:  # a slower collective: the buffer is copied once more around every call
            import torch.distributed as td
            real = td.all_reduce
            def slower(tensor, *args, **kwargs):
                tensor.copy_(tensor.clone())
                return real(tensor, *args, **kwargs)
            td.all_reduce = slower
            try:
                dmlbench.collective("all_reduce", 4 << 20, iters=4, warmup=2, rounds=10)
            finally:
                td.all_reduce = real
        else:
            dmlbench.collective("all_reduce", 4 << 20, iters=4, warmup=2, rounds=10)

    def test_in_process(dmlbench_metrics):
        samples = []
        for _ in range(10):
            begin = time.perf_counter()
            lib.in_process_step()
            samples.append(time.perf_counter() - begin)
        dmlbench_metrics.record("dispatch_overhead_s", samples)
    """
)
KINDS = {"test_one_reading": "time_to_accuracy_s", "test_fraction": "exposed_comm_fraction",
         "test_collective": "busbw_gbps", "test_in_process": "dispatch_overhead_s"}


def session(repo: Path, worse: float) -> dict[str, str]:
    (repo / "lib.py").write_text(LIB.replace("WORSE = 1.0", f"WORSE = {worse}") + "# working tree\n")
    results = repo.parent / "results.json"
    env = {k: v for k, v in os.environ.items() if k != "CI"}
    subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--dmlbench", "--world-size",
                    "2", "--dmlbench-against", "HEAD", "--dmlbench-json", str(results)], cwd=repo, env=env,
                   capture_output=True, text=True, timeout=1800)
    cases = json.loads(results.read_text())["cases"]
    found = {}
    for case in cases:
        name = case["nodeid"].split("::")[-1]
        verdicts = {v["metric"]: v["kind"] for v in case["verdicts"]}
        found[name] = verdicts.get(KINDS.get(name, ""), "missing")
    return found


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sessions", type=int, default=5)
    args = parser.parse_args(argv)
    begin = time.monotonic()
    tally: dict[str, dict[str, Counter[str]]] = defaultdict(lambda: defaultdict(Counter))
    with tempfile.TemporaryDirectory(prefix="dmlbench-kinds-") as folder:
        repo = Path(folder) / "repo"
        repo.mkdir()
        commits_of(repo, {"REF": {"lib.py": LIB, "test_kinds.py": CASES, "pytest.ini": "[pytest]\n"}})
        for index in range(args.sessions):
            for way, worse in (("A/A", 1.0), ("slowed", 1.5)):
                for name, kind in session(repo, worse).items():
                    tally[name][way][kind] += 1
                print(f"session {index + 1} {way} done ({time.monotonic() - begin:.0f} s)", flush=True)
    print(f"\n{'case (figure)':<48} {'A/A verdicts':<36} slowed verdicts")
    for name, metric in KINDS.items():
        aa, slow = dict(tally[name]["A/A"]), dict(tally[name]["slowed"])
        print(f"{name + ' (' + metric + ')':<48} {aa!s:<36} {slow}")
    print(f"{args.sessions} sessions each way, {time.monotonic() - begin:.0f} s in all")


if __name__ == "__main__":
    main()
