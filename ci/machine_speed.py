"""This machine's speed, to quote beside a measured run: a 1024x1024 float32 matrix product on two intra-op
threads, in GFLOPS (the median of 30 products after 5 warm-up ones), and the wall time of a fresh interpreter
importing torch (the median of 3), which every inner pytest run and every world's zygote pays.

The test suite's durations (``docs/evidence/test-durations.md``) and every timing of ``.ci/run`` are only
comparable between machines with these figures beside them: the slowest host seen ran the product at
40 GFLOPS. The test suite is mostly process starts and imports, so the import time follows its speed more
closely than the matrix product does.

    python ci/machine_speed.py          # "machine speed: 1024x1024 float32 matmul, 2 threads: 311 GFLOPS; ..."
    python ci/machine_speed.py --json   # {"matmul_gflops": 311.2, "threads": 2, "size": 1024, "import_torch_s": 1.3}
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
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


def import_torch_seconds(runs: int = 3) -> float:
    """The median wall time of ``runs`` fresh interpreters that import torch and exit."""
    seconds = []
    for _ in range(runs):
        start = time.perf_counter()
        subprocess.run([sys.executable, "-c", "import torch"], check=True, timeout=300)
        seconds.append(time.perf_counter() - start)
    return statistics.median(seconds)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of a sentence")
    parser.add_argument("--products", type=int, default=PRODUCTS, help=f"timed products (default {PRODUCTS})")
    parser.add_argument("--imports", type=int, default=3, help="fresh interpreters timed (default 3)")
    args = parser.parse_args(argv)
    gflops = matmul_gflops(products=args.products)
    imports = import_torch_seconds(runs=args.imports)
    if args.json:
        print(json.dumps({"matmul_gflops": round(gflops, 1), "threads": THREADS, "size": SIZE,
                          "import_torch_s": round(imports, 2)}))
    else:
        print(f"machine speed: {SIZE}x{SIZE} float32 matmul, {THREADS} threads: {gflops:.0f} GFLOPS; "
              f"a fresh python importing torch: {imports:.2f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
