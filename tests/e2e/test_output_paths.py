"""Output paths are checked before the first case runs: a path that cannot be written is a usage error in
seconds, naming the option, the path and the fix, and no case runs (the results are never lost at the end).

This machine's tests run as root, for whom every folder is writable: the unwritable-folder branch is covered
by the file-in-the-way cases, which fail the same check."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import run_pytest, write_files

CASE = """
    import os, pathlib
    import pytest

    @pytest.mark.dmlbench(world_size=1)
    def test_case(dist, dmlbench):
        pathlib.Path(os.environ["RAN_MARK"]).write_text("the case ran")
        dmlbench.pedantic(lambda: None, rounds=3)
"""


@pytest.mark.parametrize(("option", "target", "problem"), [
    ("--dmlbench-json", "a_file/results.json",
     "*--dmlbench-json */a_file/results.json: */a_file is a file, not a folder*"),
    ("--dmlbench-json", "a_folder", "*--dmlbench-json */a_folder: is a folder; give a file path such as*"),
    ("--dmlbench-plots", "a_file", "*--dmlbench-plots */a_file: is a file, not a folder; give a folder path*"),
    ("--dmlbench-plots", "a_file/plots", "*--dmlbench-plots */a_file/plots: */a_file is a file, not a folder*"),
])
def test_an_output_path_that_cannot_be_written_fails_before_any_case(tmp_path: Path, option: str, target: str,
                                                                     problem: str) -> None:
    write_files(tmp_path, **{"test_x.py": CASE, "a_file": "", "pytest.ini": "[pytest]\n"})
    (tmp_path / "a_folder").mkdir()
    mark = tmp_path / "ran"
    run = run_pytest(tmp_path, "--dmlbench", option, str(tmp_path / target), RAN_MARK=str(mark))
    assert run.returncode == 4, run.output
    run.lines.fnmatch_lines([f"ERROR: {problem}"])
    assert not mark.exists()


def test_negative_control_writable_paths_are_made_and_written(tmp_path: Path) -> None:
    write_files(tmp_path, **{"test_x.py": CASE, "pytest.ini": "[pytest]\n"})
    results, plots = tmp_path / "new" / "deep" / "results.json", tmp_path / "new" / "plots"
    mark = tmp_path / "ran"
    run = run_pytest(tmp_path, "--dmlbench", "--dmlbench-json", str(results), "--dmlbench-plots", str(plots),
                     RAN_MARK=str(mark))
    assert run.returncode == 0, run.output
    assert mark.exists() and results.is_file() and plots.is_dir()
