"""The torch floor in pyproject.toml is the one the scheduled floor job installs and tests."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def declared_floor(pyproject: str) -> str:
    """The ``X.Y`` of ``torch>=X.Y`` among the package's dependencies."""
    found = re.findall(r'^\s*"torch>=(\d+\.\d+)",', pyproject, re.MULTILINE)
    assert len(found) == 1, f"expected one 'torch>=X.Y' dependency, found {found}"
    return found[0]


def floor_job_pin(install_script: str) -> str:
    """The torch version ``ci/install.sh floor`` pins."""
    match = re.search(r"^\s*floor\) pins=\(torch==(\d+\.\d+\.\d+) ", install_script, re.MULTILINE)
    assert match, "ci/install.sh has no 'floor) pins=(torch==X.Y.Z ...' line"
    return match.group(1)


def check_floor_is_tested(pyproject: str, install_script: str) -> None:
    floor, tested = declared_floor(pyproject), floor_job_pin(install_script)
    assert tested.startswith(f"{floor}."), f"pyproject declares torch>={floor}, the floor job tests {tested}"


def test_the_declared_floor_is_the_tested_one() -> None:
    check_floor_is_tested((REPO / "pyproject.toml").read_text(), (REPO / "ci" / "install.sh").read_text())


def test_negative_control_a_floor_below_the_tested_one_is_caught() -> None:
    pyproject = (REPO / "pyproject.toml").read_text()
    lowered = re.sub(r'"torch>=\d+\.\d+"', '"torch>=2.0"', pyproject)
    assert lowered != pyproject
    with pytest.raises(AssertionError, match=r"declares torch>=2.0, the floor job tests"):
        check_floor_is_tested(lowered, (REPO / "ci" / "install.sh").read_text())


def test_the_floor_job_is_scheduled_and_runs_the_tests_on_the_floor() -> None:
    text = (REPO / ".github" / "workflows" / "torch-floor.yml").read_text()
    for needle in ("schedule:", "- cron:", "workflow_dispatch:", 'python-version: "3.11"',
                   "bash ci/install.sh floor", "python -m pytest -n 2 tests"):
        assert needle in text, needle
