"""``--dmlbench-fail-on-untestable`` and ``--dmlbench-fail-on-inconclusive``: which inconclusive verdicts fail."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import run_pytest, write_files

CONFTEST = """
    def pytest_sessionstart(session):
        from pytest_dmlbench.items.stash_keys import CONFIG_KEY
        print("SCOPE=" + session.config.stash[CONFIG_KEY].fail_on_inconclusive)
"""


@pytest.mark.parametrize(("args", "ini", "scope"), [
    ((), "", "none"),
    (("--dmlbench-fail-on-untestable",), "", "untestable"),
    (("--dmlbench-fail-on-inconclusive",), "", "all"),
    (("--dmlbench-fail-on-untestable", "--dmlbench-fail-on-inconclusive"), "", "all"),  # the wider one wins
    ((), "dmlbench_fail_on_untestable = true\n", "untestable"),
    ((), "dmlbench_fail_on_inconclusive = true\n", "all"),
])
def test_each_flag_sets_its_scope(tmp_path: Path, args: tuple[str, ...], ini: str, scope: str) -> None:
    write_files(tmp_path, **{"conftest.py": CONFTEST, "test_x.py": "def test_x():\n    pass\n",
                             "pytest.ini": f"[pytest]\n{ini}"})
    # a path right after the flag is still a path: the flags take no value
    run = run_pytest(tmp_path, "--dmlbench", "-s", *args, "test_x.py")
    assert run.returncode == 0, run.output
    run.lines.fnmatch_lines([f"SCOPE={scope}", "*1 passed*"])
