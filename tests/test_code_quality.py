"""The code stays ruff- and mypy-clean, and rank-side modules stay free of pytest."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
# Modules that run inside rank processes (or are imported by them), and the parent-side engine and
# results pipeline that only the plugin wraps: no pytest import allowed.
RANK_SIDE = ["world", "bench.py", "dist_info.py", "results.py", "stats.py", "comm.py", "strategies", "robust",
             "measure", "models.py", "data", "reference.py", "case_results.py", "run_facts.py",
             "baseline", "experiments/runner.py", "experiments/datasets.py", "experiments/schema.py",
             "experiments/fields.py", "experiments/frameworks.py", "experiments/matrix.py", "experiments/loading.py",
             "properties/__init__.py", "properties/body.py", "properties/lockstep.py", "properties/channel.py",
             "properties/database.py", "projection", "gates/gate.py", "gates/wording.py", "gates/stored.py",
             "gates/paired_plan.py", "student_t.py", "paired/statistics.py"]


def _run(*command: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", *command], cwd=ROOT, capture_output=True, text=True, timeout=600)


def test_ruff_is_clean() -> None:
    result = _run("ruff", "check", ".")
    assert result.returncode == 0, result.stdout + result.stderr


def test_mypy_is_clean() -> None:
    result = _run("mypy")
    assert result.returncode == 0, result.stdout + result.stderr


def test_engine_config_and_plugin_pass_mypy_strict() -> None:
    targets = ["pytest_dmlbench/plugin.py", "pytest_dmlbench/config.py", "pytest_dmlbench/world/"]
    result = _run("mypy", "--strict", *targets)
    assert result.returncode == 0, result.stdout + result.stderr


def _imports(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module.split(".")[0])
    return names


@pytest.mark.parametrize("entry", RANK_SIDE)
def test_rank_side_code_does_not_import_pytest(entry: str) -> None:
    target = ROOT / "pytest_dmlbench" / entry
    files = sorted(target.rglob("*.py")) if target.is_dir() else [target]
    assert files, f"{entry} not found"
    offenders = [str(f.relative_to(ROOT)) for f in files if {"pytest", "_pytest"} & _imports(f)]
    assert not offenders, f"rank-side modules import pytest: {offenders}"


def test_the_entry_module_does_not_import_torch_at_top_level() -> None:
    tree = ast.parse((ROOT / "pytest_dmlbench" / "plugin.py").read_text())
    top_level = {alias.name.split(".")[0] for node in tree.body if isinstance(node, ast.Import) for alias in node.names}
    top_level |= {node.module.split(".")[0] for node in tree.body if isinstance(node, ast.ImportFrom) and node.module}
    assert "torch" not in top_level
    result = subprocess.run([sys.executable, "-c", "import sys, pytest_dmlbench.plugin; print('torch' in sys.modules)"],
                            capture_output=True, text=True, timeout=120)
    assert result.stdout.strip() == "False", result.stdout + result.stderr


def test_ci_runs_exactly_the_readme_test_command() -> None:
    readme = (ROOT / "README.md").read_text()
    ci_script = (ROOT / ".ci" / "run").read_text().strip().splitlines()
    command = ci_script[-1].replace("python -m pytest", "pytest")  # the venv's pytest, run as a module
    assert f"&& {command}\n" in readme, f"README does not end its test command with {command!r}"
