"""What does one inner pytest run of the plugin's own tests cost, started as a fresh ``python -m pytest`` against
forked from the test harness's fork server (``tests/forkserver.py``), which has imported torch and the plugin
once? Runs the same trivial two-rank case both ways in alternation and prints the CPU seconds and wall seconds a
run took (the children's CPU, ranks included; the fork server's own start-up is counted in its first block).

    python -m studies.inner_run_cost --runs 8 --blocks 2
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

from tests.conftest import clean_env
from tests.forkserver import ForkServer

CASE = """
    import pytest, torch, torch.distributed as dist

    @pytest.mark.dmlbench(world_size=2)
    def test_all_reduce():
        t = torch.ones(2)
        dist.all_reduce(t)
        assert t[0] == 2
"""
ARGS = ["-p", "no:cacheprovider", "-p", "no:randomly", "-p", "no:hypothesispytest", "--dmlbench", "-q"]


def children_cpu_s() -> float:
    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    return used.ru_utime + used.ru_stime


def block(folder: Path, runs: int, forked: bool) -> tuple[float, float]:
    """CPU and wall seconds per run over ``runs`` runs one way (a new fork server per forked block)."""
    env = clean_env(TMPDIR=str(folder))
    cpu, wall = children_cpu_s(), time.perf_counter()
    server = ForkServer(env) if forked else None
    for _ in range(runs):
        if server is not None:
            done = server.run(ARGS, folder, env, timeout=300)
        else:
            done = subprocess.run([sys.executable, "-m", "pytest", *ARGS], cwd=folder, env=env, capture_output=True,
                                  text=True, timeout=300)
        if done.returncode != 0:
            raise SystemExit(f"the inner run failed:\n{done.stdout}{done.stderr}")
    if server is not None:
        server.close()  # reaped: its CPU (and its children's) is counted
    return (children_cpu_s() - cpu) / runs, (time.perf_counter() - wall) / runs


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=8, help="inner runs per block (default 8)")
    parser.add_argument("--blocks", type=int, default=2, help="blocks of each way, alternating (default 2)")
    args = parser.parse_args(argv)
    if args.runs < 1 or args.blocks < 1:
        parser.error("--runs and --blocks must be at least 1")
    figures: dict[str, list[tuple[float, float]]] = {"fresh": [], "forked": []}
    with tempfile.TemporaryDirectory(prefix="inner-cost-") as scratch:
        folder = Path(scratch)
        (folder / "test_case.py").write_text(textwrap.dedent(CASE))
        (folder / "pytest.ini").write_text("[pytest]\n")
        for _ in range(args.blocks):
            for way in ("fresh", "forked"):
                figures[way].append(block(folder, args.runs, way == "forked"))
    for way, blocks in figures.items():
        cpu = statistics.median(c for c, _ in blocks)
        wall = statistics.median(w for _, w in blocks)
        print(f"{way:>6}: {cpu:.2f} s of CPU and {wall:.2f} s of wall time a run "
              f"(median of {len(blocks)} blocks of {args.runs}; load {os.getloadavg()[0]:.1f})")
    ratio = statistics.median(c for c, _ in figures["forked"]) / statistics.median(c for c, _ in figures["fresh"])
    print(f"forked / fresh CPU: {ratio:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
