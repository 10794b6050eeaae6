"""``ci/cpu_per_test.py``: each test's CPU time over every process it starts, and its summary."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from ci.cpu_per_test import ACCOUNTING, CpuGroup, main, read_rows, summary
from tests.conftest import run_pytest, write_files

ROOT = Path(__file__).resolve().parents[2]
CASES = """
    import subprocess, sys, time

    def test_spins_in_a_child():
        subprocess.run([sys.executable, "-c",
                        "import time\\nend = time.process_time() + 0.6\\nwhile time.process_time() < end: pass"],
                       check=True)

    def test_sleeps():
        time.sleep(0.6)
"""


def writable_controller() -> bool:
    probe = ACCOUNTING / f"dmlbench-probe-{os.getpid()}"
    try:
        probe.mkdir()
    except OSError:
        return False
    probe.rmdir()
    return True


def test_a_test_is_charged_its_childrens_cpu_and_not_its_sleep(tmp_path: Path) -> None:
    if not writable_controller():
        pytest.skip(f"no writable cgroup-v1 CPU accounting controller at {ACCOUNTING} (needs root on cgroup v1)")
    write_files(tmp_path, **{"test_work.py": CASES})
    out = tmp_path / "cpu.jsonl"
    groups_before = set(ACCOUNTING.glob("dmlbench-test-cpu-*"))  # a run that profiles this one has its own
    run = run_pytest(tmp_path, "-p", "ci.cpu_per_test", "--cpu-per-test", str(out), PYTHONPATH=str(ROOT))
    assert run.returncode == 0, run.output
    rows = {r["nodeid"]: r for r in read_rows(out)}
    spins, sleeps = rows["test_work.py::test_spins_in_a_child"], rows["test_work.py::test_sleeps"]
    # the spin is a child process's, which the test process's own CPU time would not hold
    assert spins["cpu_s"] >= 0.5, rows
    # negative control: the sleep takes as much wall time and almost no CPU
    assert sleeps["wall_s"] >= 0.5 and sleeps["cpu_s"] < 0.3, rows
    assert set(ACCOUNTING.glob("dmlbench-test-cpu-*")) == groups_before, "the run left its cgroup behind"


def test_without_a_writable_controller_it_says_what_it_needs(tmp_path: Path) -> None:
    with pytest.raises(RuntimeError, match="needs a writable cgroup-v1 CPU accounting controller at"):
        CpuGroup(root=tmp_path / "no-controller")


def test_the_summary_ranks_tests_and_files_by_cpu(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rows = [{"nodeid": "tests/a.py::t1", "cpu_s": 3.0, "wall_s": 9.0},
            {"nodeid": "tests/b.py::t2", "cpu_s": 2.0, "wall_s": 1.0},
            {"nodeid": "tests/b.py::t3", "cpu_s": 2.0, "wall_s": 1.0}]
    text = summary(rows, top=1)
    assert text.splitlines()[0] == "3 tests, 7 s of CPU in all"
    assert "tests/a.py::t1" in text and "t2" not in text  # the one test that used the most
    assert text.splitlines()[-1].endswith("tests/b.py")  # the file that used the most
    path = tmp_path / "cpu.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows) + '{"nodeid": "cut sh')
    assert main([str(path)]) == 2
    assert f"{path}:4: not a row of --cpu-per-test" in capsys.readouterr().err
