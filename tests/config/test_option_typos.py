"""A misspelt option of the plugin is refused naming the option it looks like, instead of pytest's bare
"unrecognized arguments"; unknown flags far from every option of the plugin are left to pytest."""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_dmlbench.config.option_typos import misspelt
from pytest_dmlbench.plugin import option_names
from tests.conftest import run_pytest, write_files


def test_misspelt_options_are_named_with_the_option_they_look_like(tmp_path: Path) -> None:
    write_files(tmp_path, **{"test_x.py": "def test_x():\n    pass\n"})
    run = run_pytest(tmp_path, "--dmlbench-treshold", "5", "--dmlbench-jsn=r.json", "--other-flag")
    assert run.returncode == 4, run.output
    run.lines.fnmatch_lines([
        "ERROR: unrecognized options:",
        "  --dmlbench-treshold: did you mean --dmlbench-threshold?",
        "  --dmlbench-jsn: did you mean --dmlbench-json?",
        "  also unrecognized: --other-flag",
        "`pytest --help` lists the plugin's options under \"distributed training cases and benchmarks\"",
    ])
    assert "Traceback" not in run.output and "passed" not in run.output


@pytest.mark.parametrize(("flag", "line"), [
    ("--dmlbench-treshold", "--dmlbench-treshold: did you mean --dmlbench-threshold?"),
    ("--dmlbnech-json=x", "--dmlbnech-json: did you mean --dmlbench-json?"),
    ("--worldsize", "--worldsize: did you mean --world-size?"),
    ("--dmlbench-fail-on-improvements",
     "--dmlbench-fail-on-improvements: did you mean --dmlbench-fail-on-improvement?"),
    # the shared prefix alone does not make a suggestion
    ("--dmlbench-nothing", "--dmlbench-nothing: not an option of pytest-dmlbench"),
    ("--junitxm", None),  # not the plugin's: pytest says it
])
def test_which_option_a_flag_misspells(flag: str, line: str | None) -> None:
    assert misspelt([flag], option_names()) == ([line] if line else [])
