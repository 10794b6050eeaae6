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
    return str(found[0])


def install_pin(install_script: str, kind: str) -> str:
    """The torch version ``ci/install.sh KIND`` pins (``pinned``: CI's, ``floor``: the floor job's)."""
    match = re.search(rf"^\s*{kind}\) pins=\(torch==(\d+\.\d+\.\d+) ", install_script, re.MULTILINE)
    assert match, f"ci/install.sh has no '{kind}) pins=(torch==X.Y.Z ...' line"
    return match.group(1)


def floor_job_pin(install_script: str) -> str:
    """The torch version ``ci/install.sh floor`` pins."""
    return install_pin(install_script, "floor")


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


def readme_test_commands(readme: str) -> list[str]:
    """The pytest commands of the README's test command (the set-up line that runs ``pytest -n 2``)."""
    line = next(line for line in readme.splitlines() if "pip install" in line and "pytest -n 2" in line)
    return [part.strip().replace("pytest ", "python -m pytest ", 1) for part in line.split("&&")
            if part.strip().startswith("pytest ")]


def missing_steps(workflow: str, readme: str) -> list[str]:
    """What the floor job lacks: its schedule, the floor install, and each pytest of the README's test
    command as a step of its own."""
    needles = ["schedule:", "- cron:", "workflow_dispatch:", 'python-version: "3.11"', "bash ci/install.sh floor"]
    needles += [f"run: {command}\n" for command in readme_test_commands(readme)]
    return [needle for needle in needles if needle not in workflow]


def test_the_floor_job_is_scheduled_and_runs_the_readme_test_command_on_the_floor() -> None:
    readme = (REPO / "README.md").read_text()
    assert len(readme_test_commands(readme)) == 2  # the plugin's tests, then the correctness suites
    workflow = (REPO / ".github" / "workflows" / "torch-floor.yml").read_text()
    assert missing_steps(workflow, readme) == []


def test_negative_control_a_floor_job_without_the_correctness_suites_is_caught() -> None:
    readme = (REPO / "README.md").read_text()
    workflow = (REPO / ".github" / "workflows" / "torch-floor.yml").read_text()
    trimmed = workflow.replace("run: python -m pytest --dmlbench --world-size 2 -m correctness\n", "")
    assert trimmed != workflow
    assert missing_steps(trimmed, readme) == ["run: python -m pytest --dmlbench --world-size 2 -m correctness\n"]
