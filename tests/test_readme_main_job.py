"""The README's first command installs what the main job needs and no linters or test tools, and shows why
items skip: the ``bench`` extra covers every optional package ``bench_cases/`` imports, leaves out what only the
plugin's own tests use, and ``[test]`` (which ``.ci/run`` installs) holds all of it."""

from __future__ import annotations

import ast
import re
import sys
from pathlib import Path

import pytest

tomllib = pytest.importorskip("tomllib", reason="reads pyproject.toml with Python 3.11's tomllib")

ROOT = Path(__file__).resolve().parents[1]
TEST_ONLY = {"ruff", "mypy", "pytest-xdist", "selenium", "scipy", "mkdocs", "matplotlib", "types-tabulate",
             "types-psutil", "pandas", "pyarrow"}
MODULE_TO_PACKAGE = {"yaml": "pyyaml"}  # import name -> distribution name, where they differ
FRAMEWORK_PACKAGES = {"ray_train": "ray"}  # an experiment file's `framework:` -> what it needs


def package(requirement: str) -> str:
    return re.split(r"[<>=\[ ;]", requirement, maxsplit=1)[0].lower()


def first_command(readme: str) -> str:
    return next(line.strip() for line in readme.splitlines() if "pip install" in line and "--world-size 4" in line)


def optional_imports(folder: Path) -> set[str]:
    """Packages the files of ``folder`` import or look up with ``find_spec``, beyond the standard library and
    this package; and those the experiment files' frameworks need."""
    names: set[str] = set()
    for path in folder.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                names |= {alias.name.split(".")[0] for alias in node.names}
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names.add(node.module.split(".")[0])
            elif (isinstance(node, ast.Call) and getattr(node.func, "attr", "") == "find_spec" and node.args
                  and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str)):
                names.add(node.args[0].value.split(".")[0])
    for path in folder.glob("*.yaml"):
        names |= {need for framework, need in FRAMEWORK_PACKAGES.items() if framework in path.read_text()}
    names -= set(sys.stdlib_module_names) | {"pytest_dmlbench", "bench_cases", "__future__"}
    return {MODULE_TO_PACKAGE.get(name, name) for name in names}


def missing_and_extra(pyproject: dict[str, object], needed: set[str]) -> tuple[set[str], set[str]]:
    """What the bench extra lacks of ``needed``, and what test-only tools it holds."""
    project = pyproject["project"]
    assert isinstance(project, dict)
    base = {package(r) for r in project["dependencies"]}
    bench = {package(r) for r in project["optional-dependencies"]["bench"]}
    return needed - base - bench - {"horovod"}, bench & TEST_ONLY


def test_the_bench_extra_holds_what_bench_cases_import_and_no_test_tools() -> None:
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    needed = optional_imports(ROOT / "bench_cases")
    assert {"hypothesis", "deepspeed", "ray"} <= needed, needed
    assert missing_and_extra(pyproject, needed) == (set(), set())
    test = {package(r) for r in pyproject["project"]["optional-dependencies"]["test"]}
    assert {package(r) for r in pyproject["project"]["optional-dependencies"]["bench"]} <= test  # .ci/run has all


def test_negative_control_a_linter_in_bench_or_a_package_left_out_is_caught() -> None:
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    needed = optional_imports(ROOT / "bench_cases")
    pyproject["project"]["optional-dependencies"]["bench"] = ["ruff>=0.6", "deepspeed>=0.14", "ray[train]>=2.60"]
    assert missing_and_extra(pyproject, needed) == ({"hypothesis"}, {"ruff"})


def test_the_first_command_installs_the_bench_extra_and_prints_skip_reasons() -> None:
    command = first_command((ROOT / "README.md").read_text())
    assert 'pip install -e ".[bench]"' in command and "[test]" not in command, command
    assert command.endswith("pytest --dmlbench --world-size 4 -rs"), command
    with pytest.raises(StopIteration):
        first_command("pip install -e '.[test]' && pytest -n 2 tests")
