"""One block of a case: the case body re-run on its (kept) rank world with a fixed round budget.

The world is the one the plugin already keeps for the case's backend and world size, so a block pays no
start-up: only the dispatch (milliseconds) and the case body's own set-up (building its model, say), which
lies outside the timed rounds. The body's ``dmlbench`` calls run ``rounds`` rounds after ``warmup`` rounds
(the ``paired_block`` option of :class:`~pytest_dmlbench.bench.RankBench`). Used on both sides of the
paired gate, each side with its own version of the plugin.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

import pytest

from pytest_dmlbench.bench import BLOCK_OPTION


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
    from pytest_dmlbench.errors import WorldError
    from pytest_dmlbench.failure import failure_text
    from pytest_dmlbench.measure.memory import peak_memory_metrics
    from pytest_dmlbench.plugin import RUN_KEY, SESSION_KEY, SETTINGS_KEY
    from pytest_dmlbench.recording import metrics_from_payload
    from pytest_dmlbench.session import UnsendableArgument, case_seed, split_arguments

    settings = item.stash[SETTINGS_KEY]
    backend = item.stash[RUN_KEY]
    dml = item.config.stash[SESSION_KEY]
    callspec = getattr(item, "callspec", None)
    begin = time.monotonic()
    try:
        registry_args, pickled = split_arguments(
            tuple(item._fixtureinfo.argnames), item.funcargs, dict(callspec.params) if callspec is not None else {}
        )
        world = dml.pool.world(backend, settings.world_size)
    except (UnsendableArgument, WorldError) as exc:
        return BlockResult("failed", message=str(exc), elapsed_s=time.monotonic() - begin)
    run = world.run(
        item.nodeid,
        seed=case_seed(item.nodeid),
        registry_args=registry_args,
        pickled_args=pickled,
        measure_memory="dmlbench" in item._fixtureinfo.argnames,
        options={BLOCK_OPTION: {"rounds": rounds, "warmup": warmup, "iterations": iterations}},
        timeout_s=settings.timeout_s,
    )
    elapsed = time.monotonic() - begin
    if not run.passed:
        statuses = {r.outcome.status for r in run.ranks if r.outcome is not None}
        status = "skipped" if statuses == {"skipped"} else "failed"
        return BlockResult(status, message=failure_text(run, settings.world_size, backend), elapsed_s=elapsed)
    first = run.ranks[0].outcome
    assert first is not None
    metrics = metrics_from_payload(first.payload)
    peaks = [r.outcome.payload["peak_memory"] for r in run.ranks
             if r.outcome is not None and "peak_memory" in r.outcome.payload]
    if peaks and metrics:
        metrics = {**peak_memory_metrics(peaks), **metrics}
    return BlockResult(
        "passed",
        {name: {"unit": m.unit, "better": m.better, "samples": list(m.samples)} for name, m in metrics.items()},
        elapsed_s=elapsed,
    )
