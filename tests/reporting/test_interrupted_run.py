"""A paired run stopped by Ctrl-C says so first and prints nothing that reads like the run's result: no block
counts, no run-level statement, no watch list, no verdict counts. (An uninterrupted paired run prints its gate
section: ``test_live_progress.py``'s paired test checks it.)"""

from __future__ import annotations

from pathlib import Path

from pytest_dmlbench.results.table import INTERRUPTED_KEY
from pytest_dmlbench.results.table_layout import terminal_table
from tests.conftest import run_pytest
from tests.results.casefactory import make_case, make_run

CASES = """
    import time
    import pytest

    @pytest.mark.dmlbench(world_size=1, threshold=50, pair_budget=5)
    @pytest.mark.parametrize("n", [1, 2])
    def test_same(dist, dmlbench, n):
        dmlbench(time.sleep, 0.01)
"""
# Ctrl-C as the second case starts; only in the working tree (REF, the commit, has no conftest)
CONFTEST = """
    def pytest_runtest_setup(item):
        if item.name.endswith("[2]"):
            raise KeyboardInterrupt
"""


def test_an_interrupted_paired_run_says_so_first_and_gives_no_result(tmp_path: Path) -> None:
    from tests.gates.paired.gitrepo import make_repo

    repo = make_repo(tmp_path / "repo", **{"test_cases.py": CASES, "pytest.ini": "[pytest]\n"})
    (repo / "conftest.py").write_text(CONFTEST.replace("\n    ", "\n"))
    run = run_pytest(repo, "--dmlbench", "--dmlbench-against", "HEAD", COLUMNS="120", timeout=600)
    assert run.returncode == 2, run.output  # pytest's exit status for an interrupted run
    lines = run.lines.lines
    said = next(i for i, line in enumerate(lines) if line.startswith("dmlbench: INTERRUPTED (KeyboardInterrupt)"))
    assert "after 1 of 2 case(s)" in lines[said], lines[said]
    assert said < next(i for i, line in enumerate(lines) if "= dmlbench =" in line)  # before the table
    assert said < next(i for i, line in enumerate(lines) if "KeyboardInterrupt" in line and "!" in line)
    assert "counts left out: the run was interrupted" in run.output
    for result_like in ("= dmlbench gate =", "block pairs per case", "verdicts on ", "cases by headline verdict",
                        "settled: ", "REF HEAD: worktree"):
        assert result_like not in run.output, result_like


def test_the_table_of_an_interrupted_run_leaves_its_counts_out() -> None:
    """The same results with and without the interruption recorded: only the counts differ (negative control
    for the check above)."""
    from pytest_dmlbench.gates.stored.compare import CompareSettings, compare_run

    nodeid = "bench_cases/test_x.py::test_y"
    results = compare_run(make_run([make_case(nodeid, 0.01, seed=1)]), make_run([make_case(nodeid, 0.01, seed=2)]),
                          CompareSettings(min_runs=1))
    assert "verdicts on " in terminal_table(results, width=100)
    results.run[INTERRUPTED_KEY] = "KeyboardInterrupt"
    table = terminal_table(results, width=100)
    assert "verdicts on " not in table and "cases by headline verdict" not in table
    assert "counts left out: the run was interrupted" in table and "test_x.py::test_y" in table
