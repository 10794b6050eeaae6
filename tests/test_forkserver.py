"""Inner pytest runs forked from a server that has imported torch and the plugin (tests/forkserver.py) behave as a
fresh ``python -m pytest`` would: the same exit status and output, the run's own folder, environment, ``TMPDIR``
and ``PYTHONPATH``, a run killed at its timeout, and a fresh interpreter where only one can honour the
environment."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests import forkserver
from tests.conftest import clean_env, run_pytest, write_files

CASES = """
    import gc, os, sys, tempfile, time
    import helper

    def test_sees_its_world():
        assert os.getcwd() == os.environ["EXPECTED_CWD"]
        assert tempfile.gettempdir() == os.environ["TMPDIR"]
        assert helper.WHERE == "beside the tests"
        print("env", os.environ["MARK"])
        print("frozen", gc.get_freeze_count() > 0)

    def test_imports_from_pythonpath():
        print("extra", __import__("on_path").NAME)

    def test_fails():
        assert 1 + 1 == 3

    def test_hangs():
        if os.environ.get("HANG"):
            time.sleep(600)
"""


@pytest.fixture(scope="module")
def server() -> Iterator[forkserver.ForkServer]:
    started = forkserver.ForkServer(clean_env())
    yield started
    started.close()


def project(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    write_files(tmp_path, **{"test_forked.py": CASES, "helper.py": "WHERE = 'beside the tests'\n",
                             "extra/on_path.py": "NAME = 'from PYTHONPATH'\n", "pytest.ini": "[pytest]\n"})
    (tmp_path / "tmp").mkdir()
    env = clean_env(EXPECTED_CWD=str(tmp_path), TMPDIR=str(tmp_path / "tmp"), MARK="marked")
    return tmp_path, env


def fresh(folder: Path, args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "pytest", *args], cwd=folder,
                          capture_output=True, text=True, env=env, timeout=120)


def test_a_forked_run_ends_and_reports_as_a_fresh_one(server: forkserver.ForkServer, tmp_path: Path) -> None:
    folder, env = project(tmp_path)
    args = ["-p", "no:cacheprovider", "-p", "no:hypothesispytest", "-s", "-q", "-k", "not hangs and not pythonpath"]
    forked = server.run(args, folder, env, timeout=120)
    alone = fresh(folder, args, env)
    assert forked.returncode == alone.returncode == 1, forked.stdout + forked.stderr
    for run in (forked, alone):
        assert "env marked" in run.stdout and not run.stderr
        assert "assert (1 + 1) == 3" in run.stdout and "1 failed, 1 passed" in run.stdout
    # the server's imports are frozen out of the child's garbage collections (a fresh interpreter has none frozen)
    assert "frozen True" in forked.stdout and "frozen False" in alone.stdout
    # negative control: the same run in another folder does not see this one's files
    elsewhere = server.run(args, tmp_path / "tmp", env, timeout=120)
    assert elsewhere.returncode == 5 and "no tests ran" in elsewhere.stdout


def test_a_run_with_its_own_pythonpath_gets_a_fresh_interpreter_that_honours_it(tmp_path: Path) -> None:
    folder, env = project(tmp_path)
    run = run_pytest(folder, "-s", "-q", "-k", "pythonpath", PYTHONPATH=str(folder / "extra"),
                     EXPECTED_CWD=env["EXPECTED_CWD"], MARK=env["MARK"], TMPDIR=env["TMPDIR"])
    assert run.returncode == 0 and "extra from PYTHONPATH" in run.output, run.output


def test_a_run_past_its_timeout_is_killed_and_the_server_serves_the_next(
        server: forkserver.ForkServer, tmp_path: Path) -> None:
    folder, env = project(tmp_path)
    with pytest.raises(subprocess.TimeoutExpired):
        server.run(["-p", "no:cacheprovider", "-q", "-k", "hangs"], folder, env | {"HANG": "1"}, timeout=5)
    after = server.run(["-p", "no:cacheprovider", "-q", "-k", "hangs"], folder, env, timeout=120)
    assert after.returncode == 0, after.stdout + after.stderr


def test_what_only_an_interpreter_s_start_reads_gets_a_fresh_one() -> None:
    base = {"PATH": "/bin", "PYTHONDONTWRITEBYTECODE": "1", "TMPDIR": "/tmp"}
    assert forkserver.forkable(base | {"TMPDIR": "/elsewhere", "SLOWDOWN": "2"}, base)
    for changed in ({"PYTHONPATH": "/x"}, {"LD_PRELOAD": "libtcmalloc.so"}, {"OMP_NUM_THREADS": "1"},
                    {"PYTHONDONTWRITEBYTECODE": ""}):
        assert not forkserver.forkable(base | changed, base), changed
