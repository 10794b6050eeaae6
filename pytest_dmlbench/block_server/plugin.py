"""B's side of the paired gate: a pytest plugin that turns a pytest run of REF into a block server.

A starts ``python -m pytest --dmlbench ... -p pytest_dmlbench.block_server.plugin`` in REF's worktree, with
REF's copy of ``pytest_dmlbench`` first on ``sys.path`` when REF has one. This plugin replaces the run
loop: after collection (the main plugin has started the rank processes by then) it announces its protocol
version and its cases, then runs the blocks A asks for (:mod:`pytest_dmlbench.gates.paired.protocol`), keeping
each case set up across its blocks and every world alive for the whole run.
"""

from __future__ import annotations

import os
import traceback
from pathlib import Path
from typing import Any

import pytest

import pytest_dmlbench
from pytest_dmlbench.pytest_internals import mark_call_phase_reported

if Path(__file__).resolve().parents[1] != Path(pytest_dmlbench.__file__).resolve().parent:
    # REF's tree holds an older pytest_dmlbench without this module, and an installed copy supplied it:
    # serving from a mix of two versions would measure neither, so refuse before importing anything more.
    raise ImportError(
        f"the pytest_dmlbench imported from {Path(pytest_dmlbench.__file__).parent} has no paired server "
        f"(this one belongs to the copy at {Path(__file__).resolve().parents[1]})"
    )

from pytest_dmlbench.gates.gate import BlockResult
from pytest_dmlbench.gates.paired.protocol import (
    PROTOCOL_VERSION,
    BlockAnswer,
    Channel,
    ProtocolError,
    channel_from_env,
)
from pytest_dmlbench.items.case import records_in_process, run_block, run_in_process_block
from pytest_dmlbench.measure.rounds import BlockBudget

CHANNEL_KEY = pytest.StashKey[Channel]()


def plugin_version() -> str:
    """This copy's version (REF's own when REF's tree holds the plugin)."""
    return str(getattr(pytest_dmlbench, "__version__", "unknown"))


def pytest_configure(config: pytest.Config) -> None:
    channel = channel_from_env(os.environ)
    if channel is None:
        raise pytest.UsageError(
            "pytest_dmlbench.block_server.plugin serves blocks to a --dmlbench-against run and is started by it; "
            "do not load it by hand (-p pytest_dmlbench.block_server.plugin)"
        )
    config.stash[CHANNEL_KEY] = channel


@pytest.hookimpl(trylast=True)
def pytest_sessionstart(session: pytest.Session) -> None:
    """A block server keeps only the world of the case it serves (the engine's pool, where it has one): the
    paired gate runs two servers beside the session's own worlds, and restarting a world costs ~0.1 s."""
    pool = _kept_worlds(session)
    if pool is not None:
        pool.one_world_at_a_time = True


class _CaseSlot:
    """The one case currently set up (fixtures filled), torn down when another case is asked for."""

    def __init__(self) -> None:
        self.item: pytest.Function | None = None

    def switch_to(self, item: pytest.Function | None) -> None:
        if self.item is item:
            return
        if self.item is not None:
            current, self.item = self.item, None
            mark_call_phase_reported(current)
            current.ihook.pytest_runtest_teardown(item=current, nextitem=item)
        if item is not None:
            item.ihook.pytest_runtest_setup(item=item)  # raises on a skip or a fixture error
            self.item = item


def _kept_worlds(session: pytest.Session) -> Any:
    """The engine's pool of kept worlds (forked ranks), or None for a launcher that keeps none."""
    from pytest_dmlbench.items.stash_keys import ENGINE_KEY

    return getattr(session.config.stash.get(ENGINE_KEY, None), "pool", None)


def _block(slot: _CaseSlot, item: pytest.Function, rounds: int, warmup: int, iterations: int,
           whole_experiment: bool = False, profile: bool = False, fresh_world: bool = False) -> BlockResult:
    if fresh_world and (pool := _kept_worlds(item.session)) is not None:
        pool.stop_kept_worlds()  # the case's next run starts a world of newly forked ranks
    try:
        slot.switch_to(item)
    except pytest.skip.Exception as exc:
        slot.item = None
        return BlockResult("skipped", message=str(exc.msg))
    except Exception as exc:  # the case's own set-up failed in REF: reported to A with its traceback
        slot.item = None
        return BlockResult("failed", message="".join(traceback.format_exception(exc)))
    if any(m.name == "skip" for m in item.iter_markers()):  # a backend the machine lacks, say
        skip = next(m for m in item.iter_markers() if m.name == "skip")
        return BlockResult("skipped", message=str(skip.kwargs.get("reason", "")))
    block = BlockBudget(rounds, warmup, iterations, whole_experiment=whole_experiment, profile=profile)
    if records_in_process(item):
        return run_in_process_block(item, block)
    return run_block(item, block)


def _serve(session: pytest.Session, channel: Channel) -> None:
    from pytest_dmlbench.items.stash_keys import SETTINGS_KEY

    if session.testsfailed:
        channel.send({"type": "error", "message": f"REF's cases did not collect: {session.testsfailed} error(s); "
                      "see REF's pytest output"})
        return
    cases: dict[str, Any] = {item.nodeid: item for item in session.items
                             if SETTINGS_KEY in item.stash or records_in_process(item)}
    channel.send({
        "type": "hello", "protocol": PROTOCOL_VERSION, "plugin_version": plugin_version(),
        "plugin_file": pytest_dmlbench.__file__, "in_process_blocks": True,
        "budgeted_experiments": True, "profiles_blocks": True, "redraws_worlds": _kept_worlds(session) is not None,
        "cases": [{"nodeid": nodeid, "file": str(cases[nodeid].path)} for nodeid in sorted(cases)],
    })
    slot = _CaseSlot()
    try:
        while True:
            try:
                message = channel.receive()
            except ProtocolError:
                break  # A has gone: stop serving
            if message["type"] == "end":
                break
            if message["type"] != "block":
                channel.send({"type": "error", "message": f"unexpected message {message!r}"})
                break
            nodeid = str(message["nodeid"])
            item = cases.get(nodeid)
            if item is None:
                result = BlockResult("unknown", message=f"this block server has no case {nodeid!r}")
            else:
                result = _block(slot, item, int(message["rounds"]), int(message["warmup"]),
                                int(message.get("iterations", 1)), bool(message.get("whole_experiment", False)),
                                bool(message.get("profile", False)), bool(message.get("fresh_world", False)))
            answer: BlockAnswer = {"type": "result", "nodeid": nodeid, "status": result.status,
                                   "message": result.message, "elapsed_s": result.elapsed_s, "metrics": result.metrics}
            if result.profile is not None:
                answer["profile"] = result.profile
            channel.send(answer)
    finally:
        slot.switch_to(None)


@pytest.hookimpl(tryfirst=True)
def pytest_runtestloop(session: pytest.Session) -> bool:
    """Serve blocks instead of running the cases; ends quietly when A has gone (a closed pipe)."""
    try:
        _serve(session, session.config.stash[CHANNEL_KEY])
    except BrokenPipeError:
        pass  # A ended (finished, interrupted or killed) while B was answering
    return True
