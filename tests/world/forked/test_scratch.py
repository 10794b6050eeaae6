"""Scratch folders that killed sessions left behind are removed by the next session; a live session's and
other folders are kept."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from pytest_dmlbench.world.forked.scratch import abandoned_scratch_folders, remove_abandoned_scratch_folders
from tests.conftest import run_pytest, write_files


def ended_pid() -> int:
    """The pid of a process that has ended (and been reaped)."""
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


def test_only_folders_of_ended_sessions_are_removed(tmp_path: Path) -> None:
    live = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.read()"], stdin=subprocess.PIPE)
    try:
        abandoned = tmp_path / f"dmlbench-{ended_pid()}-abc123"
        (abandoned / "world1-gloo-ws2").mkdir(parents=True)
        (abandoned / "zygote.log").write_text("left behind")
        in_use = tmp_path / f"dmlbench-{live.pid}-def456"  # negative control: its session still runs
        in_use.mkdir()
        mine = tmp_path / f"dmlbench-{os.getpid()}-ghi789"
        mine.mkdir()
        others = [tmp_path / "dmlbench-own-xyz", tmp_path / "dmlbench-lockstep-1", tmp_path / "unrelated-1-a"]
        for other in others:
            other.mkdir()
        as_file = tmp_path / f"dmlbench-{ended_pid()}-file"
        as_file.write_text("not a folder")

        assert abandoned_scratch_folders(str(tmp_path)) == [str(abandoned)]
        assert remove_abandoned_scratch_folders(str(tmp_path)) == 1
        assert not abandoned.exists()
        assert in_use.is_dir() and mine.is_dir() and as_file.is_file() and all(o.is_dir() for o in others)
    finally:
        assert live.stdin is not None
        live.stdin.close()
        live.wait(30)


def test_a_session_removes_what_a_killed_session_left(tmp_path: Path) -> None:
    """A session run with its temporary folder in ``tmp_path`` finds an abandoned scratch folder there and
    removes it, and leaves none of its own."""
    scratch = tmp_path / "tmp"
    abandoned = scratch / f"dmlbench-{ended_pid()}-killed"
    (abandoned / "world1-gloo-ws2").mkdir(parents=True)
    project = tmp_path / "project"
    write_files(project, **{"test_x.py": "import pytest\n\n@pytest.mark.dmlbench\ndef test_a(dist):\n    pass\n",
                            "pytest.ini": "[pytest]\n"})
    run = run_pytest(project, "--dmlbench", "--world-size", "1", TMPDIR=str(scratch))
    run.lines.fnmatch_lines(["*1 passed*"])
    assert not abandoned.exists()
    assert not [p for p in scratch.iterdir() if p.name.startswith("dmlbench-")], list(scratch.iterdir())
