"""``--dmlbench-futility``: parsed strictly, refused by name, and off unless asked for."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from pytest_dmlbench.config import DEFAULT_FUTILITY, parse_futility
from pytest_dmlbench.errors import ConfigError
from tests.conftest import run_pytest, write_files


def test_a_futility_mode_is_on_or_off_and_anything_else_names_the_choices() -> None:
    assert parse_futility(" On ") is True and parse_futility("off") is False
    assert DEFAULT_FUTILITY == "off"  # the measured default: see docs/evidence/run-logs.md
    with pytest.raises(ConfigError, match=re.escape("--dmlbench-futility: 'soon' is not a futility mode; choose "
                                                    "one of on, off")):
        parse_futility("soon")


def test_a_bad_futility_mode_is_a_usage_error(tmp_path: Path) -> None:
    write_files(tmp_path, **{"test_x.py": "def test_x():\n    pass\n"})
    run = run_pytest(tmp_path, "--dmlbench", "--dmlbench-futility", "soon")
    assert run.returncode == 4, run.output
    run.lines.fnmatch_lines(["ERROR: --dmlbench-futility: 'soon' is not a futility mode; choose one of on, off"])
