"""``--dmlbench-json`` writes every case of the run with its outcome, whether or not it recorded figures: a run
whose cases record none still writes its file, a case that failed on one rank and a case skipped before it ran
are in it, and the file's readers (``show``, ``compare``) read it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pytest_dmlbench.cli import main as cli
from tests.conftest import run_pytest, write_files

CASES = """
    import pytest

    @pytest.mark.dmlbench(world_size=2)
    def test_no_figures(dist):
        assert dist.world_size == 2

    @pytest.mark.dmlbench(world_size=2)
    def test_fails_on_rank_1(dist):
        assert dist.rank == 0

    @pytest.mark.dmlbench(world_size=2)
    def test_skipped_on_the_ranks(dist):
        pytest.skip("nothing to measure")

    @pytest.mark.dmlbench(world_size=2, backend="nccl")
    def test_skipped_before_it_ran(dist):
        pass

    def test_in_process_fails(dmlbench_metrics):
        assert False

    def test_not_a_case():
        pass
"""


def test_the_results_file_holds_every_case_with_its_outcome(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    write_files(tmp_path, **{"test_x.py": CASES})
    results = tmp_path / "out" / "results.json"
    run = run_pytest(tmp_path, "--dmlbench", "--dmlbench-json", str(results))
    assert run.returncode == 1, run.output
    run.lines.fnmatch_lines([f"dmlbench: results written to {results}", "*2 failed, 2 passed, 2 skipped*"])
    document = json.loads(results.read_text())
    assert {case["nodeid"].split("::")[1]: (case["outcome"], case["world_size"], case["backend"], case["metrics"])
            for case in document["cases"]} == {
        "test_no_figures": ("passed", 2, "gloo", {}),
        "test_fails_on_rank_1": ("failed", 2, "gloo", {}),
        "test_skipped_on_the_ranks": ("skipped", 2, "gloo", {}),
        "test_skipped_before_it_ran": ("skipped", 2, "nccl", {}),
        "test_in_process_fails": ("failed", 1, "local", {}),
    }  # test_not_a_case is no dmlbench case
    capsys.readouterr()
    assert cli(["show", str(results)]) == 0
    assert "test_x.py::test_fails_on_rank_1 (failed)" in capsys.readouterr().out
    assert cli(["compare", str(results), str(results)]) == 0
