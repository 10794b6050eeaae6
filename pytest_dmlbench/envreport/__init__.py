"""The environment report (``python -m pytest_dmlbench env [--json]``): machine, software stack, GPUs,
process-group backends, the variables that steer distributed runs, and a live 2-rank gloo check."""

from __future__ import annotations

from typing import Any

from pytest_dmlbench.baseline.machine_facts import distributed_variables, software_facts
from pytest_dmlbench.envreport.livecheck import LiveCheck, live_check

__all__ = ["LiveCheck", "distributed_variables", "environment_report", "live_check", "software_facts"]


def environment_report(*, live: bool = True, timeout_s: float = 60.0) -> dict[str, Any]:
    """``{"machine": {...}, "live_check": {...} | None}``; the machine section holds the same facts as a
    results file's. The live check runs first, before anything may initialise CUDA in this process."""
    check = live_check(timeout_s=timeout_s).to_dict() if live else None
    from pytest_dmlbench.baseline.fingerprint import machine_fingerprint, machine_key
    from pytest_dmlbench.world.backend import select_backend
    from pytest_dmlbench.world.cuda_count import cuda_device_count

    machine = machine_fingerprint(select_backend("auto", 2, cuda_device_count()).backend)
    return {"machine_key": machine_key(machine), "machine": machine, "live_check": check}
