"""What a rank's CPU time per step counts: the thread that computes, or the whole rank process.

A rank with one intra-op thread computes on the thread that calls the step, so that thread's CPU time
(:func:`~pytest_dmlbench.measure.clock.cpu_now`) is the step's work and nothing else: gloo's threads, which
spend CPU on communication that varies with scheduling, are left out (measured quieter than the whole
process: ``docs/explanation/statistics.md``). A rank with an intra-op pool computes on several threads
that Python cannot name, so there the whole process is read, gloo's threads included. Either way waiting
(a slower peer, a barrier, a sleep, I/O) does not count: CPU time sees work, wall time sees everything.
On CUDA ranks it is the host's launch and synchronisation work, not the device's.

A collective benchmark times work that runs on the backend's own threads (gloo's worker and transport
threads copy, reduce and send while the calling thread waits), so there the whole process is read
(:meth:`CpuReader.for_collectives`).
"""

from __future__ import annotations

from dataclasses import dataclass

from pytest_dmlbench.measure.clock import cpu_clock_missing, cpu_now


@dataclass(frozen=True)
class CpuReader:
    """This rank's CPU clock for steps: ``read()`` differences are CPU seconds spent on the step."""

    whole_process: bool
    missing: str | None = None  # why the platform cannot read it: then no CPU figure is recorded

    @property
    def readable(self) -> bool:
        return self.missing is None

    @classmethod
    def for_rank(cls) -> CpuReader:
        """The reader for the calling rank: its thread with one intra-op thread, else its whole process."""
        import torch

        return cls(whole_process=torch.get_num_threads() > 1, missing=cpu_clock_missing())

    @classmethod
    def for_collectives(cls) -> CpuReader:
        """The reader for a collective benchmark: the whole process, where the backend's threads do the work."""
        return cls(whole_process=True, missing=cpu_clock_missing())

    def read(self) -> float:
        """CPU seconds so far on this reader's scope (0.0 where the platform cannot read them)."""
        return cpu_now(self.whole_process) if self.missing is None else 0.0

    def scope_text(self) -> str:
        return "the rank's whole process (an intra-op pool)" if self.whole_process else "the rank's computing thread"
