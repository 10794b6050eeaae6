"""Timing targets of simulated ranks (issue 23): the DDP equivalence case at 256 and 1024 simulated ranks,
peak memory, and the cost of one collective per rank. Targets are checked here, never in unit tests.

    python -m studies.simulated_scale                 # everything, with the targets
    python -m studies.simulated_scale --skip-cases    # only the DDP breakdown and the per-collective costs
    python -m studies.simulated_scale --strategies ddp,allreduce,bucketed,ps,local_sgd

Each equivalence case runs in a pytest subprocess of its own (its wall time as pytest's ``--durations``
reports the call, and the subprocess's peak resident memory); the cases run before this process loads
torch, because a child's peak resident memory starts from its parent's.
"""

from __future__ import annotations

import argparse
import itertools
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CASE = "bench_cases/test_simulated_equivalence.py::test_strategy_matches_reference_at_scale"
TARGETS_S = {256: 5.0, 1024: 30.0}  # DDP equivalence, 2 cores


def run_case(strategy: str, ranks: int) -> tuple[float, float]:
    """(seconds of the case's call, peak MB of its pytest process) for one equivalence case."""
    with tempfile.TemporaryFile("w+") as output:
        proc = subprocess.Popen(
            [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-p", "no:randomly", "-q", "--dmlbench",
             "--durations=1", "--durations-min=0", f"{CASE}[{strategy}-ranks{ranks}]"],
            cwd=ROOT, stdout=output, stderr=subprocess.STDOUT, text=True)
        _, status, usage = os.wait4(proc.pid, 0)
        proc.returncode = os.waitstatus_to_exitcode(status)
        output.seek(0)
        text = output.read()
    match = re.search(r"([0-9.]+)s call", text)
    if proc.returncode != 0 or match is None:
        raise SystemExit(f"{strategy} at {ranks} ranks did not pass:\n{text[-3000:]}")
    return float(match.group(1)), usage.ru_maxrss / 1024


def ddp_breakdown(ranks: int) -> dict[str, float]:
    """Seconds of each phase of the DDP equivalence case at ``ranks`` simulated ranks (rank 0's clock between
    barriers; a barrier's own cost is in each figure)."""
    import torch.distributed as dist
    import torch.nn.functional as F

    from bench_cases import test_simulated_equivalence as suite
    from pytest_dmlbench.training.reference import flat, reference_sgd
    from pytest_dmlbench.world.simulated.runner import SimulatedCase

    marks: list[tuple[str, float]] = []

    def mark(name: str) -> None:
        dist.barrier()
        if dist.get_rank() == 0:
            marks.append((name, time.perf_counter()))

    def body() -> None:
        mark("start")
        strategy, reference = suite.build_pair("ddp", "mlp", 0.9)
        mark("model and DistributedDataParallel(...) on every rank")
        main = dist.get_rank() == 0
        batches = [suite.global_batch("mlp", suite.SHARD * ranks, s) if main else None for s in range(suite.STEPS)]
        like = suite.global_batch("mlp", suite.SHARD, 0)
        shards = [suite.scatter_shards(batch, strategy, like) for batch in batches]
        mark("data: rank 0 makes the global batches and scatters the shards")
        trainer = reference_sgd(reference, [b for b in batches if b is not None], F.cross_entropy,
                                lr=strategy.lr, momentum=strategy.momentum)
        for step, data in enumerate(shards, start=1):
            assert data is not None
            strategy.step(data[0], data[1], F.cross_entropy)
            if main:
                next(trainer)
            mark(f"DDP step {step} (forward, backward, gradient all-reduce, SGD)")
            suite.check_step(flat(strategy.model.parameters()), flat(reference.parameters()) if main else None,
                             what="breakdown")
            mark(f"check after step {step} (broadcast + 2 flag all-reduces)")

    begin = time.perf_counter()
    run = SimulatedCase(1, body, lambda info: {}, world_size=ranks, seed=0, timeout_s=600).run()
    total = time.perf_counter() - begin
    if not run.passed:
        raise SystemExit(f"the DDP breakdown case failed at {ranks} ranks")
    phases = {"world start and end (threads, init_process_group)": total - (marks[-1][1] - marks[0][1])}
    for (_, before), (name, after) in itertools.pairwise(marks):
        phases[name] = after - before
    return phases


def collective_costs(ranks: int, rounds: int = 10) -> dict[str, float]:
    """Microseconds per rank of one collective at ``ranks`` simulated ranks (medians of ``rounds``)."""
    import torch
    import torch.distributed as dist

    from pytest_dmlbench.world.simulated.runner import SimulatedCase

    payload = 2826  # the DDP case's parameter count (float64)
    calls = {
        "barrier": lambda: dist.barrier(),
        "all_reduce (2826 float64)": lambda: dist.all_reduce(torch.ones(payload, dtype=torch.float64)),
        "broadcast (2826 float64)": lambda: dist.broadcast(torch.ones(payload, dtype=torch.float64), 0),
    }
    costs: dict[str, float] = {}
    for name, call in calls.items():
        times: list[float] = []

        def body(call: object = call, times: list[float] = times) -> None:
            for _ in range(rounds):
                dist.barrier()
                start = time.perf_counter()
                call()  # type: ignore[operator]
                dist.barrier()
                if dist.get_rank() == 0:
                    times.append(time.perf_counter() - start)

        baseline: list[float] = []

        def empty(baseline: list[float] = baseline) -> None:
            for _ in range(rounds):
                dist.barrier()
                start = time.perf_counter()
                dist.barrier()
                if dist.get_rank() == 0:
                    baseline.append(time.perf_counter() - start)

        SimulatedCase(1, body, lambda info: {}, world_size=ranks, seed=0, timeout_s=600).run()
        if name != "barrier":
            SimulatedCase(1, empty, lambda info: {}, world_size=ranks, seed=0, timeout_s=600).run()
            extra = sorted(times)[len(times) // 2] - sorted(baseline)[len(baseline) // 2]
        else:
            extra = sorted(times)[len(times) // 2] / 2  # two barriers in each timed span
        costs[name] = extra / ranks * 1e6
    return costs


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--skip-cases", action="store_true", help="only the per-collective costs")
    parser.add_argument("--strategies", default="ddp", help="comma-separated strategies to time (default ddp)")
    args = parser.parse_args(argv)
    failed = False
    if not args.skip_cases:
        for strategy in args.strategies.split(","):
            for ranks in (64, 256, 1024):
                seconds, peak_mb = run_case(strategy, ranks)
                target = TARGETS_S.get(ranks) if strategy == "ddp" else None
                met = target is not None and seconds <= target
                verdict = "" if target is None else f" (target <= {target:g} s: {'met' if met else 'MISSED'})"
                failed |= target is not None and seconds > target
                print(f"{strategy} equivalence at {ranks} ranks: {seconds:.2f} s, peak RSS {peak_mb:.0f} MB{verdict}",
                      flush=True)
    for ranks in (256, 1024):
        phases = ddp_breakdown(ranks)
        print(f"DDP case at {ranks} ranks, {sum(phases.values()):.2f} s:", flush=True)
        for name, seconds in phases.items():
            print(f"    {seconds:6.2f} s  {name}", flush=True)
    for ranks in (64, 256, 1024):
        costs = collective_costs(ranks)
        print(f"{ranks:5d} ranks: " + "; ".join(f"{name} {us:.0f} us/rank" for name, us in costs.items()), flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
