"""One block of a case: the case body re-run on its (kept) rank world with a fixed round budget.

The world is the one the plugin already keeps for the case's backend and world size, so a block pays no
start-up: only the dispatch (milliseconds) and the case body's own set-up (building its model, say), which
lies outside the timed rounds. The body's ``dmlbench`` calls run ``rounds`` rounds after ``warmup`` rounds
(a :class:`~pytest_dmlbench.measure.rounds.BlockBudget` sent with the case). Used on both sides of the
paired gate, each side with its own version of the plugin.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

import pytest

from pytest_dmlbench.measure.rounds import BlockBudget


@dataclass
class BlockResult:
    """What one block measured: per metric its unit, direction and per-round samples (rank 0's, which
    are rank-agreed, and peak memory maxed over ranks); or why it did not pass."""

    status: str  # passed, failed, skipped
    metrics: dict[str, dict[str, Any]] = field(default_factory=dict)
    message: str = ""
    elapsed_s: float = 0.0


def run_block(item: pytest.Function, rounds: int, warmup: int, iterations: int = 1) -> BlockResult:
    """Run ``item``'s body once on its world with a budget of ``rounds`` measured rounds (``iterations``
    calls per round for ``dmlbench(fn)``/``pedantic``, at least; ``train`` steps once per round).

    ``item`` must be set up (fixtures filled, backend chosen), as it is inside its call phase.
    """
    from pytest_dmlbench.case_results import CaseFacts, CaseResultBuilder
    from pytest_dmlbench.plugin import BACKEND_KEY, ENGINE_KEY, SETTINGS_KEY
    from pytest_dmlbench.world.engine import CaseNotRunnable, CollectedCase, PreparedCase
    from pytest_dmlbench.world.failure import failure_text

    settings = item.stash[SETTINGS_KEY]
    backend = item.stash[BACKEND_KEY]
    callspec = getattr(item, "callspec", None)
    argnames = tuple(item._fixtureinfo.argnames)
    case = PreparedCase(
        CollectedCase(item.nodeid, item.obj, argnames, dict(callspec.params) if callspec is not None else {}),
        funcargs=item.funcargs, world_size=settings.world_size, backend=backend, timeout_s=settings.timeout_s,
        uses_bench="dmlbench" in argnames, block=BlockBudget(rounds, warmup, iterations),
    )
    begin = time.monotonic()
    try:
        run = item.config.stash[ENGINE_KEY].run(case)
    except CaseNotRunnable as exc:
        return BlockResult("failed", message=str(exc), elapsed_s=time.monotonic() - begin)
    elapsed = time.monotonic() - begin
    if not run.passed:
        statuses = {r.outcome.status for r in run.ranks if r.outcome is not None}
        status = "skipped" if statuses == {"skipped"} else "failed"
        return BlockResult(status, message=failure_text(run, settings.world_size, backend), elapsed_s=elapsed)
    facts = CaseFacts(item.nodeid, {}, settings.world_size, backend, None)
    result = CaseResultBuilder().from_ranks(facts, [r.outcome for r in run.ranks])
    metrics = result.metrics if result is not None else {}
    return BlockResult(
        "passed",
        {name: {"unit": m.unit, "better": m.better, "samples": list(m.samples)} for name, m in metrics.items()},
        elapsed_s=elapsed,
    )
