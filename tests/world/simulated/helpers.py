"""Running a body on simulated ranks inside a test, and reading the outcome."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pytest_dmlbench.world.failure import failure_text
from pytest_dmlbench.world.outcome import CaseOutcome
from pytest_dmlbench.world.simulated.runner import SimulatedCase

# Far beyond any of these bodies: a fault must be reported by detection, never by this timeout.
TIMEOUT_S = 600.0


def simulate(body: Callable[..., Any], world_size: int, *, seed: int = 0, strict: bool = False) -> CaseOutcome:
    """Run ``body(info)`` (``info``: the rank's DistInfo) on ``world_size`` simulated ranks (in strict mode)."""
    return SimulatedCase(1, body, lambda info: {"info": info}, world_size=world_size, seed=seed,
                         timeout_s=TIMEOUT_S, strict=strict).run()


def passed(run: CaseOutcome, world_size: int) -> bool:
    """True when every rank passed; otherwise fails the test with the whole report."""
    assert run.passed, failure_text(run, world_size, "simulated")
    return True
