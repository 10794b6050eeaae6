"""How much this machine's speed moves by itself: a fixed CPU-bound workload timed again and again.

Each run times ``--rounds`` rounds of the same work (a float64 matrix product loop on one thread, in this
process) and keeps their median; runs follow each other for ``--minutes``. Prints, beside the date, the
machine and the command:

- the spread of the run medians around their overall median (5th, 50th and 95th percentile, and the extremes);
- the standard deviation of the relative difference between consecutive runs' medians (what a comparison of
  two back-to-back runs of unchanged code sees), for the whole recording and per ``--window`` minutes;
- the share of runs at least 20 % and 35 % slower than the overall median (slow phases);
- how thread CPU time moved with wall time (their ratio's spread): when both move together the host slowed
  the virtual CPU; when only wall time moves, something on the machine competed for the cores.

    python -m studies.machine_phases --minutes 10          # the figures docs/evidence/gate.md quotes
"""

from __future__ import annotations

import argparse
import itertools
import os
import platform
import statistics
import time
from datetime import datetime, timezone

import torch


def one_round(a: torch.Tensor, b: torch.Tensor, repeats: int) -> tuple[float, float]:
    """Wall and thread-CPU seconds of ``repeats`` products ``a @ b``."""
    wall, cpu = time.perf_counter(), time.thread_time()
    for _ in range(repeats):
        torch.mm(a, b)
    return time.perf_counter() - wall, time.thread_time() - cpu


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(share * (len(ordered) - 1))))]


def consecutive_sd(medians: list[float]) -> float:
    """Standard deviation of (next - this) / this over consecutive runs, in percent."""
    steps = [(later - earlier) / earlier for earlier, later in itertools.pairwise(medians)]
    return 100 * statistics.stdev(steps) if len(steps) > 1 else float("nan")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--minutes", type=float, default=10.0, help="how long to record")
    parser.add_argument("--rounds", type=int, default=40, help="rounds per run (a run's figure: their median)")
    parser.add_argument("--window", type=float, default=2.0, help="minutes per window for the consecutive spread")
    args = parser.parse_args(argv)
    if args.minutes <= 0 or args.rounds < 1 or args.window <= 0:
        parser.error("--minutes and --window must be positive and --rounds at least 1")
    torch.set_num_threads(1)
    generator = torch.Generator().manual_seed(0)
    a = torch.randn(192, 192, dtype=torch.float64, generator=generator)
    b = torch.randn(192, 192, dtype=torch.float64, generator=generator)
    one_round(a, b, 20)  # warm-up
    started = time.monotonic()
    runs: list[tuple[float, float, float]] = []  # (start minute, median wall, median wall / cpu)
    while time.monotonic() - started < args.minutes * 60:
        at = (time.monotonic() - started) / 60
        rounds = [one_round(a, b, 10) for _ in range(args.rounds)]
        runs.append((at, statistics.median(w for w, _ in rounds),
                     statistics.median(w / c for w, c in rounds if c > 0)))
    medians = [median for _, median, _ in runs]
    overall = statistics.median(medians)
    ratios = [m / overall for m in medians]
    windows: dict[int, list[float]] = {}
    for at, median, _ in runs:
        windows.setdefault(int(at // args.window), []).append(median)
    wall_over_cpu = [r for _, _, r in runs]

    print(f"{datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC; {platform.node()}, {os.cpu_count()} cores, "
          f"{platform.processor() or platform.machine()}, load average {os.getloadavg()[0]:.1f} at the end")
    print(f"command: python -m studies.machine_phases --minutes {args.minutes:g} --rounds {args.rounds} "
          f"--window {args.window:g}")
    print(f"{len(runs)} runs of {args.rounds} rounds over {args.minutes:g} min; overall median "
          f"{overall * 1e3:.3f} ms a round")
    print(f"run median / overall median: 5th percentile {percentile(ratios, 0.05):.2f}x, median "
          f"{percentile(ratios, 0.5):.2f}x, 95th percentile {percentile(ratios, 0.95):.2f}x "
          f"(extremes {min(ratios):.2f}x-{max(ratios):.2f}x)")
    per_window = [consecutive_sd(values) for _, values in sorted(windows.items()) if len(values) > 2]
    window_text = ", ".join(f"{sd:.1f}" for sd in per_window)
    print(f"consecutive runs' medians differ by SD {consecutive_sd(medians):.1f} % over the whole recording; "
          f"per {args.window:g}-minute window: {window_text} %")
    print(f"runs >= 20 % slower than the overall median: {sum(r >= 1.2 for r in ratios)} of {len(runs)}; "
          f">= 35 % slower: {sum(r >= 1.35 for r in ratios)}")
    print(f"wall / thread CPU time per round: 5th-95th percentile {percentile(wall_over_cpu, 0.05):.3f}-"
          f"{percentile(wall_over_cpu, 0.95):.3f} (1.000: the thread never waited for a core; the host "
          "slowing the virtual CPU moves both alike)")


if __name__ == "__main__":
    main()
