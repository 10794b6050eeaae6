"""``--dmlbench-fail-on-inconclusive[=untestable|all]``: which inconclusive verdicts fail their item."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from pytest_dmlbench.config import parse_inconclusive_scope
from pytest_dmlbench.errors import ConfigError
from tests.conftest import run_pytest, write_files


@pytest.mark.parametrize(("value", "scope"), [
    ("all", "all"), (" Untestable ", "untestable"), ("none", "none"),
    # the ini file's boolean spellings of the option's earlier, flag-only form keep their meaning
    ("true", "all"), ("1", "all"), ("false", "none"), ("0", "none"), (True, "all"), (False, "none"),
])
def test_each_spelling_reads_as_its_scope(value: object, scope: str) -> None:
    assert parse_inconclusive_scope(value) == scope


def test_a_bad_scope_names_the_choices() -> None:
    with pytest.raises(ConfigError, match=re.escape("--dmlbench-fail-on-inconclusive: 'some' is not a scope of "
                                                    "inconclusive verdicts to fail; choose one of none, untestable, "
                                                    "all")):
        parse_inconclusive_scope("some")


def test_a_bad_scope_on_the_command_line_is_a_usage_error(tmp_path: Path) -> None:
    write_files(tmp_path, **{"test_x.py": "def test_x():\n    pass\n"})
    run = run_pytest(tmp_path, "--dmlbench", "--dmlbench-fail-on-inconclusive=some")
    assert run.returncode == 4, run.output
    run.lines.fnmatch_lines(["ERROR: --dmlbench-fail-on-inconclusive: 'some' is not a scope*"])
