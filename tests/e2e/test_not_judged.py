"""A validation that raises NotJudged is reported as not judged: skipped with its reason, listed and counted
at the end of the run (also under xdist), failed under --dmlbench-fail-on-inconclusive; never a pass."""

from __future__ import annotations

from pathlib import Path

from tests.conftest import run_pytest, write_files

CASES = """
    import pytest
    from pytest_dmlbench.errors import NotJudged

    @pytest.mark.dmlbench
    def test_undecided(dist):
        raise NotJudged("ratio 1.3 +- 0.4 (95 % interval): wider than the 0.1 tolerance")

    @pytest.mark.dmlbench
    def test_judged(dist):
        pass
"""


def test_not_judged_is_skipped_with_its_reason_listed_and_counted(tmp_path: Path) -> None:
    write_files(tmp_path, **{"test_x.py": CASES})
    result = run_pytest(tmp_path, "--dmlbench", "--world-size", "2", "-rs")
    assert result.returncode == 0, result.output
    result.lines.fnmatch_lines([
        "*dmlbench: 1 validation not judged*",
        "test_x.py::test_undecided: ratio 1.3 +- 0.4 (95 % interval): wider than the 0.1 tolerance",
        "*--dmlbench-fail-on-inconclusive fails them*",
        "SKIPPED [[]1[]] *: not judged: ratio 1.3*",
        "*1 passed, 1 skipped*",
    ])
    assert "test_x.py::test_judged:" not in result.output  # a judged case is not listed


def test_fail_on_inconclusive_fails_a_validation_that_was_not_judged(tmp_path: Path) -> None:
    write_files(tmp_path, **{"test_x.py": CASES})
    result = run_pytest(tmp_path, "--dmlbench", "--world-size", "2", "--dmlbench-fail-on-inconclusive")
    assert result.returncode == 1, result.output
    result.lines.fnmatch_lines([
        "*not judged, and --dmlbench-fail-on-inconclusive is set: ratio 1.3*",
        "*1 failed, 1 passed*",
    ])


def test_a_validation_not_judged_ran_so_the_untestable_scope_does_not_fail_it(tmp_path: Path) -> None:
    write_files(tmp_path, **{"test_x.py": CASES})
    result = run_pytest(tmp_path, "--dmlbench", "--world-size", "2", "--dmlbench-fail-on-untestable")
    assert result.returncode == 0, result.output  # it measured and could not settle: unsettled, listed
    result.lines.fnmatch_lines(["*dmlbench: 1 validation not judged*", "*1 passed, 1 skipped*"])


def test_the_list_is_complete_under_xdist(tmp_path: Path) -> None:
    write_files(tmp_path, **{"test_x.py": CASES})
    result = run_pytest(tmp_path, "--dmlbench", "--world-size", "1", "-n", "2")
    assert result.returncode == 0, result.output
    result.lines.fnmatch_lines(["*dmlbench: 1 validation not judged*", "test_x.py::test_undecided: ratio 1.3*"])


def test_a_verdict_reached_on_one_rank_only_is_a_mixed_outcome(tmp_path: Path) -> None:
    write_files(tmp_path, **{"test_x.py": """
        import pytest
        from pytest_dmlbench.errors import NotJudged

        @pytest.mark.dmlbench
        def test_rank_dependent(dist):
            if dist.rank == 0:
                raise NotJudged("too noisy on rank 0")
    """})
    result = run_pytest(tmp_path, "--dmlbench", "--world-size", "2")
    assert result.returncode == 1, result.output
    result.lines.fnmatch_lines(["*rank 0 not_judged ('too noisy on rank 0'), rank 1 passed*", "*1 failed*"])
    assert "validation not judged" not in result.output
