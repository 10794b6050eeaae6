"""World start and trivial-case dispatch at world size 4: the forked engine beside Ray actors, in one run.

    python -m studies.ray_vs_fork [--worlds 3] [--cases 30]

Starts ``--worlds`` worlds of each kind one after the other (the first forked start includes the zygote),
runs ``--cases`` trivial cases on each and prints every world's start time and median dispatch time.
Ray runs as a local instance (``ray.init(num_cpus=4)``) unless ``RAY_ADDRESS`` is set.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from typing import Any

from pytest_dmlbench.world.forked.pool import WorldPool
from pytest_dmlbench.world.messages import WorldSpec
from pytest_dmlbench.world.ray.world import RayWorld, ensure_ray
from pytest_dmlbench.world.registry import CaseEntry, CaseRegistry


def trivial(dist: Any) -> None:
    """The case both engines run."""


REGISTRY: CaseRegistry = {"trivial": CaseEntry(trivial, ("dist",), {})}


def median_dispatch_s(world: Any, cases: int, case: str = "trivial") -> float:
    """Median seconds of running ``case`` (of ``REGISTRY``, by default the trivial one) ``cases`` times."""
    times = []
    for _ in range(cases):
        begin = time.perf_counter()
        run = world.run(case, seed=0, registry_args=(), pickled_args=b"", measure_memory=False, timeout_s=60)
        times.append(time.perf_counter() - begin)
        if not run.passed:
            raise SystemExit(f"the {case} case failed: {run}")
    return statistics.median(times)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--worlds", type=int, default=3)
    parser.add_argument("--cases", type=int, default=30)
    args = parser.parse_args(argv)
    pool = WorldPool(lambda: REGISTRY, lambda n: 1)
    forked = []
    try:
        for _ in range(args.worlds):
            begin = time.perf_counter()
            world = pool.world("gloo", 4)
            forked.append((time.perf_counter() - begin, median_dispatch_s(world, args.cases)))
            world.kill()
    finally:
        pool.close()
    ensure_ray(num_cpus=4)
    actors = []
    for index in range(args.worlds):
        spec = WorldSpec(index, 4, "gloo", "", tempfile.gettempdir(), 1, 120)
        begin = time.perf_counter()
        ray_world = RayWorld(spec, REGISTRY)
        ray_world.start()
        actors.append((time.perf_counter() - begin, median_dispatch_s(ray_world, args.cases)))
        ray_world.stop()
    for name, rows in (("fork", forked), ("ray", actors)):
        print(f"{name:5} start s: {', '.join(f'{s:.3f}' for s, _ in rows)}; "
              f"median dispatch ms: {', '.join(f'{d * 1e3:.2f}' for _, d in rows)}")


if __name__ == "__main__":
    main()
