"""The plugin's engine for simulated ranks: each case runs on a new simulated world in this process.

Cases that measure (they use the ``dmlbench`` fixture) are skipped: simulated ranks share one process and
take turns, so their timings are not a real world's. A new world per case means the next case always
starts clean.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from typing import Any

from pytest_dmlbench.measure.dist_info import DistInfo
from pytest_dmlbench.world.backend import BackendChoice
from pytest_dmlbench.world.engine import CollectedCase, PreparedCase
from pytest_dmlbench.world.execute import case_seed
from pytest_dmlbench.world.messages import RankOutcome
from pytest_dmlbench.world.outcome import CaseOutcome, RankReport

BACKEND_NAME = "simulated"  # the backend simulated cases report (process_group.BACKEND_NAME)
MEASURING_SKIP = (
    "measures timings (uses the dmlbench fixture): simulated ranks share one process and take turns, so "
    "their timings are not a real world's and are not judged; run it with --dmlbench-launcher fork or ray"
)
PROPERTY_SKIP = (
    "a property-based (@given) case: its ranks agree on every example through a channel between rank "
    "processes, which simulated ranks (threads taking turns) do not provide; run it with --dmlbench-launcher fork"
)
NCCL_SKIP = "simulated ranks run on the CPU: nccl is not simulated; use --dmlbench-backend gloo or auto"


class SimulatedEngine:
    """Runs every case on simulated ranks (threads of this process)."""

    reports = True

    def __init__(self) -> None:
        self._cases = 0

    def prepare(self, cases: Sequence[CollectedCase]) -> None:
        """Nothing to start: a world is made per case."""

    def choose_backend(self, requested: str, world_size: int) -> BackendChoice:
        if requested == "nccl":
            return BackendChoice(BACKEND_NAME, NCCL_SKIP)
        from pytest_dmlbench.world.simulated.compat import incompatibility

        problem = incompatibility()
        return BackendChoice(BACKEND_NAME, problem or None)

    def run(self, case: PreparedCase) -> CaseOutcome:
        from pytest_dmlbench.properties.body import is_property

        self._cases += 1
        skip = MEASURING_SKIP if case.uses_bench else PROPERTY_SKIP if is_property(case.case.func) else ""
        if skip:
            return CaseOutcome([RankReport(rank, RankOutcome(self._cases, rank, "skipped", skip))
                                for rank in range(case.world_size)], 0.0)
        from pytest_dmlbench.world.simulated.runner import SimulatedCase

        names = case.case.argnames
        funcargs = case.funcargs

        def arguments(info: DistInfo) -> dict[str, Any]:
            """Each rank its own copy of the fixture values, as if they had been sent to a process of its own."""
            values = {name: info if name == "dist" else funcargs[name] for name in names}
            return {name: value if name == "dist" else copy.deepcopy(value) for name, value in values.items()}

        return SimulatedCase(self._cases, case.case.func, arguments, world_size=case.world_size,
                             seed=case_seed(case.case.nodeid), timeout_s=case.timeout_s,
                             communicates=case.communicates, strict=case.strict).run()

    def close(self) -> None:
        """Nothing outlives a case."""
