"""Output paths are checked before the first case runs: a path that cannot be written is a usage error in
seconds, naming the option, the path and the fix, and no case runs (the results are never lost at the end).

The check writes for real (a folder and a file, removed again): this machine's tests run as root, whom
``os.access`` grants everything, yet root cannot write under ``/proc``, which stands here for a read-only mount.
``--dmlbench-plots`` without matplotlib is refused by the same check."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

from pytest_dmlbench.config import DmlbenchConfig
from pytest_dmlbench.config.output_paths import check_file_target, check_folder_target
from pytest_dmlbench.errors import ConfigError
from pytest_dmlbench.plugin import _check_outputs
from tests.conftest import run_pytest, write_files

PROC = Path("/proc/dmlbench-nowhere")

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
    ("--dmlbench-json", str(PROC / "r.json"),
     f"--dmlbench-json {PROC}/r.json: cannot make the folder {PROC} (No such file or directory); choose a path in "
     "a folder this user can write"),
])
def test_an_output_path_that_cannot_be_written_fails_before_any_case(tmp_path: Path, option: str, target: str,
                                                                     problem: str) -> None:
    write_files(tmp_path, **{"test_x.py": CASE, "a_file": "", "pytest.ini": "[pytest]\n"})
    (tmp_path / "a_folder").mkdir()
    mark = tmp_path / "ran"
    run = run_pytest(tmp_path, "--dmlbench", option, str(tmp_path / target), RAN_MARK=str(mark))
    assert run.returncode == 4, run.output
    run.lines.fnmatch_lines([f"ERROR: {problem}"])
    assert not mark.exists() and "Traceback" not in run.output


def test_negative_control_writable_paths_are_made_and_written(tmp_path: Path) -> None:
    write_files(tmp_path, **{"test_x.py": CASE, "pytest.ini": "[pytest]\n"})
    results, plots = tmp_path / "new" / "deep" / "results.json", tmp_path / "new" / "plots"
    mark = tmp_path / "ran"
    run = run_pytest(tmp_path, "--dmlbench", "--dmlbench-json", str(results), "--dmlbench-plots", str(plots),
                     RAN_MARK=str(mark))
    assert run.returncode == 0, run.output
    assert mark.exists() and results.is_file() and plots.is_dir()


@pytest.mark.skipif(not Path("/proc/self").is_dir(), reason="needs Linux's /proc")
def test_a_path_nobody_can_write_is_refused_by_writing_there_not_by_asking() -> None:
    with pytest.raises(ConfigError, match=r"^--dmlbench-plots /proc/dmlbench-nowhere/p: cannot make the folder "
                                          r"/proc/dmlbench-nowhere \(No such file or directory\)"):
        check_folder_target(PROC / "p", "--dmlbench-plots")
    with pytest.raises(ConfigError, match=r"^--dmlbench-json /proc/r.json: cannot write a file in /proc "):
        check_file_target(Path("/proc/r.json"), "--dmlbench-json")


def test_the_check_removes_what_it_made_and_keeps_what_was_there(tmp_path: Path) -> None:
    (tmp_path / "kept").mkdir()
    (tmp_path / "kept" / "old.json").write_text("{}")
    check_folder_target(tmp_path / "new" / "deeper" / "plots", "--dmlbench-plots")
    check_file_target(tmp_path / "kept" / "old.json", "--dmlbench-json")
    assert sorted(p.relative_to(tmp_path).as_posix() for p in tmp_path.rglob("*")) == ["kept", "kept/old.json"]


class _NoMatplotlib:
    """An import finder that refuses matplotlib, as an environment without it does."""

    def find_spec(self, name: str, path: Any = None, target: Any = None) -> None:
        if name == "matplotlib" or name.startswith("matplotlib."):
            raise ImportError(f"No module named {name!r}")


def test_plots_without_matplotlib_are_refused_before_the_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    settings = DmlbenchConfig(enabled=True, world_size=2, backend="auto", timeout_s=60.0, threshold_pct=10.0,
                              save=False, compare=False, baseline_dir=tmp_path / "baselines", json_path=None,
                              fail_on_improvement=False, plots_dir=tmp_path / "plots")
    _check_outputs(settings)  # negative control: with matplotlib there the same settings pass
    monkeypatch.delitem(sys.modules, "matplotlib", raising=False)
    monkeypatch.setattr(sys, "meta_path", [_NoMatplotlib(), *sys.meta_path])
    with pytest.raises(ConfigError, match=r"plots need matplotlib, which is not installed here: pip install "
                                          r"matplotlib"):
        _check_outputs(settings)
    assert not (tmp_path / "plots").exists()
