"""How contended the CPUs were while something was measured, from Linux's pressure-stall information.

``/proc/pressure/cpu`` counts the microseconds during which at least one runnable task waited for a CPU
(the ``some`` line). Its growth over a measurement, divided by the measurement's length, is the share of
that time in which something on the machine was kept from running: near 0 on an idle machine, near 1 when
other work competes for every core. A timing validation reads it to tell a miss of its target from a
machine too busy for the target's ground truth to hold.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from pytest_dmlbench.measure.clock import now

PSI_CPU = Path("/proc/pressure/cpu")


def cpu_stall_us(path: Path = PSI_CPU) -> float | None:
    """Microseconds some task has waited for a CPU since boot; None where the kernel gives no PSI."""
    try:
        lines = path.read_text().splitlines()
    except OSError:
        return None
    for line in lines:
        name, *fields = line.split()
        if name == "some":
            values = dict(field.split("=", 1) for field in fields)
            return float(values["total"])
    return None


@dataclass(frozen=True)
class ContentionWatch:
    """The stall counter and the clock at the start of a measurement."""

    stall_us: float | None
    started_s: float
    path: Path = PSI_CPU

    @classmethod
    def start(cls, path: Path = PSI_CPU) -> ContentionWatch:
        return cls(cpu_stall_us(path), now(), path)

    def share(self) -> float | None:
        """Share of the time since :meth:`start` in which some task waited for a CPU (None without PSI)."""
        stall = cpu_stall_us(self.path)
        elapsed = now() - self.started_s
        if stall is None or self.stall_us is None or elapsed <= 0:
            return None
        return min(1.0, (stall - self.stall_us) / 1e6 / elapsed)
