"""This machine's speed, as one figure to quote beside a measured run: a 1024x1024 float32 matrix product on
two intra-op threads, in GFLOPS (the median of 30 products after 5 warm-up ones).

The test suite's durations (``docs/evidence/test-durations.md``) and every timing of ``.ci/run`` are only
comparable between machines with this figure beside them: the slowest host seen ran it at 40 GFLOPS, where a
quiet 2-core host runs it at 100-300.

    python ci/machine_speed.py          # one line: "machine speed: 1024x1024 float32 matmul, 2 threads: 311 GFLOPS"
    python ci/machine_speed.py --json   # {"matmul_gflops": 311.2, "threads": 2, "size": 1024}
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

import torch

SIZE = 1024
THREADS = 2
WARM_UP = 5
PRODUCTS = 30


def matmul_gflops(size: int = SIZE, threads: int = THREADS, products: int = PRODUCTS) -> float:
    """The median rate of ``products`` float32 ``size`` x ``size`` matrix products on ``threads`` threads."""
    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        generator = torch.Generator().manual_seed(0)
        a = torch.randn(size, size, generator=generator)
        b = torch.randn(size, size, generator=generator)
        for _ in range(WARM_UP):
            torch.mm(a, b)
        seconds = []
        for _ in range(products):
            start = time.perf_counter()
            torch.mm(a, b)
            seconds.append(time.perf_counter() - start)
    finally:
        torch.set_num_threads(before)
    return 2 * size**3 / statistics.median(seconds) / 1e9


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of a sentence")
    args = parser.parse_args(argv)
    gflops = matmul_gflops()
    if args.json:
        print(json.dumps({"matmul_gflops": round(gflops, 1), "threads": THREADS, "size": SIZE}))
    else:
        print(f"machine speed: {SIZE}x{SIZE} float32 matmul, {THREADS} threads: {gflops:.0f} GFLOPS")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
