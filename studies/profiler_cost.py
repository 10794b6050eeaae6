"""What the paired gate's profiled block costs: the same small training steps timed plain and under the plugin's
own profiler (``pytest_dmlbench.measure.op_profile.profiled``: torch.profiler's CPU activity and the collectives'
instrumentation), in alternating pairs so that a slow phase of the machine falls on both.

Each pair times ``--steps`` SGD steps of a ``--width``-wide Linear layer (forward, backward, step) once plain and
once profiled, in a random order. Prints, beside the date, the machine and the command, the median of each and
their ratio (what docs/explanation/statistics.md quotes as the profiler's cost), in wall time and in the
thread's CPU time (which other work on a shared machine does not inflate).

    python -m studies.profiler_cost                     # 50 steps of a 256-wide layer, 20 pairs
"""

from __future__ import annotations

import argparse
import os
import platform
import random
import statistics
import time
from datetime import datetime, timezone

import torch

from pytest_dmlbench.measure.op_profile import profiled


def steps(model: torch.nn.Module, optimizer: torch.optim.Optimizer, batch: torch.Tensor,
          count: int) -> tuple[float, float]:
    """Wall and thread-CPU seconds of ``count`` training steps."""
    wall, cpu = time.perf_counter(), time.thread_time()
    for _ in range(count):
        optimizer.zero_grad()
        model(batch).square().mean().backward()
        optimizer.step()
    return time.perf_counter() - wall, time.thread_time() - cpu


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=50)
    parser.add_argument("--width", type=int, default=256)
    parser.add_argument("--pairs", type=int, default=20)
    args = parser.parse_args(argv)
    torch.manual_seed(0)
    model = torch.nn.Linear(args.width, args.width)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    batch = torch.randn(32, args.width)
    steps(model, optimizer, batch, args.steps)  # warm-up
    plain: list[tuple[float, float]] = []
    profiled_s: list[tuple[float, float]] = []
    load = os.getloadavg()[0]
    for _ in range(args.pairs):
        for kind in random.sample(["plain", "profiled"], 2):
            if kind == "plain":
                plain.append(steps(model, optimizer, batch, args.steps))
            else:
                with profiled():
                    profiled_s.append(steps(model, optimizer, batch, args.steps))
    print(f"{datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC; {platform.node()}, {os.cpu_count()} cores, "
          f"load average {load:.1f} at the start, torch {torch.__version__}")
    print(f"command: python -m studies.profiler_cost --steps {args.steps} --width {args.width} --pairs {args.pairs}")
    for index, clock in enumerate(("wall", "thread CPU")):
        a = statistics.median(p[index] for p in plain)
        b = statistics.median(p[index] for p in profiled_s)
        print(f"{clock} time of {args.steps} steps: {a:.3f} s plain, {b:.3f} s profiled (medians of {args.pairs} "
              f"pairs); the profiler's cost {b / a:.2f}x")

if __name__ == "__main__":
    main()
