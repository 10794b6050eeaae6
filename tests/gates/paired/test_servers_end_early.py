"""The block servers are asked to end when the run's cases are done, both at once and before the run writes its
summary, so that their teardown (seconds each: their worlds, their plugins' end-of-session work) overlaps the
run's reporting instead of following it one server after the other (a one-case paired run ended 6.5 s after
its last line before, 1.7 s after)."""

from __future__ import annotations

import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any, cast

import pytest

from pytest_dmlbench import plugin
from pytest_dmlbench.gates.gate import Gate
from pytest_dmlbench.gates.paired.client import RefLaunch, RefProcess
from pytest_dmlbench.items.stash_keys import GATE_KEY
from tests.conftest import write_files

CASE = """
    import time

    def test_step(dist, dmlbench):
        dmlbench.pedantic(time.sleep, (0.001,), rounds=2)
"""


def a_server(project: Path) -> RefProcess:
    write_files(project, **{"test_step.py": CASE, "pytest.ini": "[pytest]\n"})
    launch = RefLaunch(worktree=project, repo_root=project, cwd=project, log_path=project / "logs" / "server.log",
                       args=["-p", "no:cacheprovider", "-p", "no:randomly", "--dmlbench", "--dmlbench-no-compare",
                             "--world-size", "1"],
                       label="HEAD", side="HEAD", tree_first=False)
    server = RefProcess(launch)
    server.start()
    server.wait_hello()
    return server


def ended_within(server: RefProcess, seconds: float) -> bool:
    assert server.process is not None
    deadline = time.monotonic() + seconds
    while server.process.poll() is None and time.monotonic() < deadline:
        time.sleep(0.1)
    return server.process.poll() is not None


def test_a_server_asked_to_end_ends_on_its_own_and_close_then_only_collects_it(tmp_path: Path) -> None:
    server = a_server(tmp_path)
    try:
        # negative control: a server nobody asked keeps serving (it waits for the next block)
        assert not ended_within(server, 2.0)
        server.request_end()
        server.request_end()  # asked once: a second request sends nothing (the server may have gone)
        assert ended_within(server, 120.0), server.launch.log_path.read_text()
        assert server.process is not None and server.process.returncode == 0
    finally:
        server.close()
    assert not server.launch.log_path.exists()  # ended cleanly: its log went with it


class RecordingGate:
    def __init__(self) -> None:
        self.calls: list[str] = []

    def finishing(self) -> None:
        self.calls.append("finishing")


def test_the_plugin_tells_the_gate_the_cases_are_done_at_session_finish() -> None:
    gate = RecordingGate()
    stash = pytest.Stash()
    stash[GATE_KEY] = cast(Gate, gate)  # only finishing() is called
    session: Any = SimpleNamespace(config=SimpleNamespace(stash=stash))
    plugin.pytest_sessionfinish(session)
    assert gate.calls == ["finishing"]
