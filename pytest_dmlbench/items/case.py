"""A pytest item as a case for the engine: the one place a :class:`PreparedCase` is built, for the item's
ordinary run and for every block of the paired gate (on both sides, each with its own plugin version); and
the block of an item whose figures are recorded in the pytest process (``dmlbench_metrics``).

A block re-runs the body on the world the plugin already keeps for the case's backend and world size, so it
pays no start-up: only the dispatch (milliseconds) and the body's own set-up, which lies outside the timed
rounds. ``item`` must be set up (fixtures filled, backend chosen), as it is inside its call phase.
"""

from __future__ import annotations

import time
import traceback
from collections.abc import Mapping
from typing import Any

import pytest

from pytest_dmlbench.errors import CaseNotRunnable
from pytest_dmlbench.gates.gate import BlockResult
from pytest_dmlbench.items.case_results import CaseFacts, CaseResultBuilder
from pytest_dmlbench.items.stash_keys import BACKEND_KEY, ENGINE_KEY, LOCAL_METRICS_KEY, SETTINGS_KEY
from pytest_dmlbench.measure.op_profile import ProfileSlot, profiled
from pytest_dmlbench.measure.rounds import BlockBudget
from pytest_dmlbench.pytest_internals import fixture_argnames
from pytest_dmlbench.results import MetricResult
from pytest_dmlbench.world.engine import CollectedCase, PreparedCase
from pytest_dmlbench.world.failure import failure_text

IN_PROCESS_FIXTURE = "dmlbench_metrics"


def callspec_params(item: pytest.Item) -> dict[str, Any]:
    callspec = getattr(item, "callspec", None)
    return dict(callspec.params) if callspec is not None else {}


def collected_case(item: pytest.Function) -> CollectedCase:
    return CollectedCase(item.nodeid, item.obj, fixture_argnames(item), callspec_params(item))


def prepared_case(item: pytest.Function, block: BlockBudget | None) -> PreparedCase:
    """``item`` ready for the engine, with its marker's settings; ``block`` replaces its round counts."""
    settings = item.stash[SETTINGS_KEY]
    case = collected_case(item)
    return PreparedCase(case, funcargs=item.funcargs, world_size=settings.world_size, backend=item.stash[BACKEND_KEY],
                        timeout_s=settings.timeout_s, uses_bench="dmlbench" in case.argnames,
                        isolation=settings.isolation, block=block, communicates=settings.communicates,
                        strict=settings.strict)


def run_block(item: pytest.Function, block: BlockBudget) -> BlockResult:
    """Run ``item``'s body once on its world with ``block``'s round budget; what it measured."""
    case = prepared_case(item, block)
    begin = time.monotonic()
    try:
        run = item.config.stash[ENGINE_KEY].run(case)
    except CaseNotRunnable as exc:
        return BlockResult("failed", message=str(exc), elapsed_s=time.monotonic() - begin)
    elapsed = time.monotonic() - begin
    if not run.passed:
        statuses = {r.outcome.status for r in run.ranks if r.outcome is not None}
        status = "skipped" if statuses == {"skipped"} else "failed"
        return BlockResult(status, message=failure_text(run, case.world_size, case.backend), elapsed_s=elapsed)
    facts = CaseFacts(item.nodeid, {}, case.world_size, case.backend, None)
    outcomes = [r.outcome for r in run.ranks]
    result = CaseResultBuilder().from_ranks(facts, outcomes)
    profile = next((o.profile for o in outcomes if o is not None and o.rank == 0), None)
    return BlockResult("passed", _as_block_metrics(result.metrics if result is not None else {}), elapsed_s=elapsed,
                       profile=profile)


def _as_block_metrics(metrics: Mapping[str, MetricResult]) -> dict[str, dict[str, Any]]:
    """What a block reports per metric (the paired protocol's form): unit, direction, samples."""
    return {name: {"unit": m.unit, "better": m.better, "samples": list(m.samples)} for name, m in metrics.items()}


def records_in_process(item: pytest.Item) -> bool:
    """Whether ``item`` records figures in the pytest process (it asks for ``dmlbench_metrics``)."""
    return isinstance(item, pytest.Function) and IN_PROCESS_FIXTURE in item.fixturenames


def run_in_process_block(item: pytest.Function, block: BlockBudget) -> BlockResult:
    """Call ``item``'s function again, here, with its fixtures as set up, and read what it recorded.

    The body sees ``block`` as ``dmlbench_metrics.block`` (``framework: ray_train`` experiments honour it);
    a body with loops of its own that ignores it is one whole call per block, bounded by the gate's per-case
    pair budget.
    """
    metrics = item.stash.get(LOCAL_METRICS_KEY, None)
    if metrics is None:
        return BlockResult("failed", message=f"{item.nodeid}: its dmlbench_metrics fixture is not set up")
    metrics.metrics.clear()
    metrics.notes.clear()
    arguments = {name: item.funcargs[name] for name in fixture_argnames(item)}
    begin = time.monotonic()
    metrics.block = block
    slot = ProfileSlot()
    try:
        if block.profile:
            with profiled() as slot:
                item.obj(**arguments)
        else:
            item.obj(**arguments)
    except pytest.skip.Exception as exc:
        return BlockResult("skipped", message=str(exc.msg), elapsed_s=time.monotonic() - begin)
    except Exception as exc:  # the body failed in this block: reported with its traceback
        return BlockResult("failed", message="".join(traceback.format_exception(exc)),
                           elapsed_s=time.monotonic() - begin)
    finally:
        metrics.block = None
    return BlockResult("passed", _as_block_metrics(metrics.metrics), elapsed_s=time.monotonic() - begin,
                       profile=slot.profile.to_dict() if slot.profile is not None else None)
