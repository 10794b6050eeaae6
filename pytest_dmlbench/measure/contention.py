"""How much of the machine other work took while something was measured, from ``/proc/stat``.

The CPU time the whole machine spent busy over a measurement (user, nice, system, irq, softirq, and steal:
time the hypervisor gave to other guests), less the CPU time of the measured processes themselves, as a
share of all cores' time: near 0 on an otherwise idle machine, near 1 when other work took every core. A
timing validation reads it to tell a miss of its target from a machine too busy for the target's ground
truth to hold.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from pytest_dmlbench.measure.clock import now

PROC_STAT = Path("/proc/stat")
BUSY_FIELDS = (0, 1, 2, 5, 6, 7)  # user nice system irq softirq steal (not idle 3, iowait 4)


def machine_busy_s(path: Path = PROC_STAT) -> float | None:
    """CPU seconds all cores have spent busy since boot; None where there is no ``/proc/stat``."""
    try:
        first = path.read_text().splitlines()[0].split()
    except (OSError, IndexError):
        return None
    if first[0] != "cpu":
        return None
    ticks = [int(value) for value in first[1:]]
    return sum(ticks[i] for i in BUSY_FIELDS if i < len(ticks)) / os.sysconf("SC_CLK_TCK")


def process_cpu_s() -> float:
    """CPU seconds this process (all its threads) has used."""
    times = os.times()
    return times.user + times.system


@dataclass(frozen=True)
class ContentionWatch:
    """The machine's busy time, this process's CPU time and the clock at the start of a measurement."""

    busy_s: float | None
    own_s: float
    started_s: float
    path: Path = PROC_STAT

    @classmethod
    def start(cls, path: Path = PROC_STAT) -> ContentionWatch:
        return cls(machine_busy_s(path), process_cpu_s(), now(), path)

    def own_cpu_s(self) -> float:
        """CPU seconds this process has used since :meth:`start`."""
        return process_cpu_s() - self.own_s

    def share(self, measured_cpu_s: float | None = None, cores: int | None = None) -> float | None:
        """Share of all cores' time since :meth:`start` that work other than the measured processes took.

        ``measured_cpu_s``: CPU seconds the measured processes used meanwhile (default: this process's);
        a world passes the sum over its ranks. None where ``/proc/stat`` cannot be read.
        """
        busy, elapsed = machine_busy_s(self.path), now() - self.started_s
        if busy is None or self.busy_s is None or elapsed <= 0:
            return None
        measured = self.own_cpu_s() if measured_cpu_s is None else measured_cpu_s
        other = busy - self.busy_s - measured
        return max(0.0, min(1.0, other / ((cores or os.cpu_count() or 1) * elapsed)))
