"""Whether a step computes: the rule by which the default CPU threshold judges CPU time only where it can settle.

A step that mostly waits (a sleep, I/O, a collective on a slow link, loader workers doing the work) spends
little CPU time on its ranks, and a little CPU time moves by a large share with whatever else its thread does:
judged, it stays inconclusive where wall time proves the case unchanged. So the plugin's default CPU threshold
judges CPU time only on a step whose ranks spent at least :data:`MIN_COMPUTING_SHARE` of the time their cores
had on the CPU: the CPU seconds summed over ranks against the step's wall time times the cores its ranks could use
(the world size, or fewer cores where ranks share them: the machine's cores shared among pytest-xdist's
workers, :meth:`~pytest_dmlbench.world.run_facts.RunFacts.cores_per_world`). A threshold given for CPU time
(option, ini, marker, per-case file) judges it on every step. Why and measured: ``docs/explanation/statistics.md``.
"""

from __future__ import annotations

from collections.abc import Mapping

from pytest_dmlbench.results import MetricResult
from pytest_dmlbench.results.stats import median

# At least a quarter of its ranks' core time on the CPU. A step that only computes reads 1 on an idle machine, and
# less where neighbours take cores (0.38 for a pure-Python loop on 2 ranks beside a 4-rank run on 2 cores); a step
# that sleeps reads under 0.05. A quarter keeps the first judged under such load and the second not.
MIN_COMPUTING_SHARE = 0.25


def computing_share(metrics: Mapping[str, MetricResult], world_size: int, cores: int) -> float | None:
    """The ranks' CPU seconds a step (medians, summed over ranks) over the core seconds they had (the median wall
    time times the cores ``world_size`` ranks can use of ``cores``); None without both figures."""
    cpu, wall = metrics.get("cpu_time_s"), metrics.get("step_time_s")
    if cpu is None or wall is None or not cpu.samples or not wall.samples:
        return None
    core_seconds = median(wall.samples) * max(1, min(world_size, cores))
    return median(cpu.samples) / core_seconds if core_seconds > 0 else None


def waiting_note(share: float) -> str:
    """What a case whose step mostly waits says of its CPU time, which the default threshold leaves unjudged."""
    return (f"CPU time not judged: the step mostly waits (its ranks computed {share:.0%} of the time their cores "
            f"had, under {MIN_COMPUTING_SHARE:.0%}); wall time judges it. Give --dmlbench-cpu-threshold (or the "
            "marker's cpu_threshold=) to judge CPU time on every step")
