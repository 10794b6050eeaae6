"""No rank process outlives the session: not after failures, not after Ctrl-C, not when pytest is killed."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from tests.conftest import clean_env, run_pytest, write_files

RECORDING_CASES = """
    import os, time
    import pytest, torch.distributed as td

    def record(dist):
        folder = os.environ["PIDS_DIR"]
        with open(os.path.join(folder, f"{os.getpid()}.pid"), "w") as handle:
            handle.write(str(os.getppid()))

    @pytest.mark.dmlbench
    def test_fails(dist):
        record(dist)
        if dist.rank == 1:
            raise RuntimeError("boom")
        td.barrier()

    @pytest.mark.dmlbench(world_size=3)
    def test_waits(dist):
        record(dist)
        if os.environ.get("HANG"):
            time.sleep(600)
"""


def interruptible() -> None:
    """In the child before exec: Ctrl-C raises KeyboardInterrupt, as in a terminal. A process started in the
    background by a shell without job control (``cmd &`` in a script, ``nohup``) inherits SIGINT ignored,
    and Python keeps an inherited SIG_IGN, so the session would never see the Ctrl-C."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def recorded_pids(folder: Path) -> set[int]:
    """Rank pids and the zygote pid (their parent) recorded by the cases."""
    pids = set()
    for path in folder.glob("*.pid"):
        pids.add(int(path.stem))
        pids.add(int(path.read_text()))
    return pids


def alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def wait_until(predicate: object, limit_s: float, what: str) -> None:
    """Poll a condition; the limit bounds the wait, it does not measure speed."""
    deadline = time.monotonic() + limit_s
    while not predicate():  # type: ignore[operator]
        if time.monotonic() > deadline:
            raise AssertionError(f"gave up waiting for {what} after {limit_s:.0f} s")
        time.sleep(0.1)


def test_no_survivors_after_failures(tmp_path: Path) -> None:
    pids_dir = tmp_path / "pids"
    pids_dir.mkdir()
    write_files(tmp_path, **{"test_x.py": RECORDING_CASES})
    result = run_pytest(tmp_path, "--dmlbench", "--world-size", "2", PIDS_DIR=str(pids_dir))
    result.lines.fnmatch_lines(["*1 failed, 1 passed*"])
    pids = recorded_pids(pids_dir)
    assert len(pids) >= 4  # two worlds' ranks and the zygote
    wait_until(lambda: not any(alive(p) for p in pids), 30, "rank processes to end")


@pytest.mark.parametrize("how", ["ctrl-c", "sigkill-pytest"])
def test_no_survivors_when_the_session_is_interrupted(tmp_path: Path, how: str) -> None:
    pids_dir = tmp_path / "pids"
    pids_dir.mkdir()
    write_files(tmp_path, **{"test_x.py": RECORDING_CASES, "pytest.ini": "[pytest]\n"})
    proc = subprocess.Popen(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--dmlbench", "-k", "waits"],
        cwd=tmp_path, env=clean_env(PIDS_DIR=str(pids_dir), HANG="1"), start_new_session=True,
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, preexec_fn=interruptible,
    )
    try:
        wait_until(lambda: len(list(pids_dir.glob("*.pid"))) == 3, 180, "all three ranks to start the case")
        pids = recorded_pids(pids_dir)
        assert all(alive(p) for p in pids)
        if how == "ctrl-c":
            os.killpg(proc.pid, signal.SIGINT)  # what a terminal sends to the whole foreground group
        else:
            os.kill(proc.pid, signal.SIGKILL)
        output, _ = proc.communicate(timeout=60)
        if how == "ctrl-c":
            assert "KeyboardInterrupt" in output, output
        wait_until(lambda: not any(alive(p) for p in pids), 30, "rank processes to end")
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
