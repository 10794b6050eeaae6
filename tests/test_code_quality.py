"""The code stays ruff- and mypy-clean, and rank-side modules stay free of pytest."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest
import tomllib

from tests.baseline.test_torch_floor import install_pin

ROOT = Path(__file__).resolve().parents[1]
# The modules that face pytest (hooks, items, the gate objects pytest calls, REF's block server). Every other
# module, whatever runs it (a rank, the parent's engine, the results pipeline, the command line), imports no
# pytest: a new module is held to that unless it is added here.
PYTEST_FACING = {
    "plugin.py", "pytest_internals.py", "config/__init__.py", "config/option_typos.py",
    "items/case.py", "items/stash_keys.py", "items/readers.py", "items/property_cases.py",
    "reporting/results_reporter.py", "reporting/progress.py", "reporting/not_judged.py", "reporting/interruption.py",
    "block_server/plugin.py",
    "experiments/collect.py", "gates/choose.py", "gates/paired/gate.py", "gates/paired/launch.py",
}


def _pinned_torch() -> str:
    """The torch the type checks are held against: the one CI pins (``ci/install.sh``)."""
    return install_pin((ROOT / "ci" / "install.sh").read_text(), "pinned")


def _on_the_pinned_torch() -> bool:
    import torch

    return bool(torch.__version__.split("+")[0] == _pinned_torch())


# torch's type stubs change between releases: on another torch (the floor job) mypy reports torch's
# differences, not the package's
needs_the_pinned_torch = pytest.mark.skipif(not _on_the_pinned_torch(),
                                            reason=f"type checks run against the pinned torch {_pinned_torch()}")


def _run(*command: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", *command], cwd=ROOT, capture_output=True, text=True, timeout=600)


def test_ruff_is_clean() -> None:
    result = _run("ruff", "check", ".")
    assert result.returncode == 0, result.stdout + result.stderr


@needs_the_pinned_torch
def test_mypy_is_clean() -> None:
    result = _run("mypy")
    assert result.returncode == 0, result.stdout + result.stderr


@needs_the_pinned_torch
def test_the_whole_package_passes_mypy_strict() -> None:
    """``[tool.mypy]`` says ``strict = true``; this holds it there even if the setting is edited away."""
    result = _run("mypy", "--strict", "pytest_dmlbench")
    assert result.returncode == 0, result.stdout + result.stderr


def left_unchecked(mypy: dict[str, object]) -> list[str]:
    """What a ``[tool.mypy]`` table leaves out of the package, the tests and the benchmark cases: a folder missing
    from ``files``, or any ``exclude`` (which would take files of them out)."""
    files = mypy.get("files", [])
    assert isinstance(files, list), files
    missing = [folder for folder in ("pytest_dmlbench", "tests", "bench_cases") if folder not in files]
    return missing + ([f"exclude = {mypy['exclude']!r}"] if "exclude" in mypy else [])


@needs_the_pinned_torch
def test_mypy_covers_the_tests_and_the_bench_cases() -> None:
    """``mypy`` with no arguments (the run above) checks the tests and the benchmark cases with the package, all
    of them: this holds them there if they are edited out of ``[tool.mypy] files`` or excluded."""
    mypy = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["mypy"]
    assert not left_unchecked(mypy), left_unchecked(mypy)


def test_a_folder_left_out_of_mypy_is_caught() -> None:
    """Negative control for the rule above."""
    assert left_unchecked({"files": ["pytest_dmlbench", "tests"]}) == ["bench_cases"]
    assert left_unchecked({"files": ["pytest_dmlbench", "tests", "bench_cases"], "exclude": ["^tests/world/"]}) == [
        "exclude = ['^tests/world/']"]


def named_like_a_test_file(name: str) -> bool:
    """Whether pytest's default ``python_files`` (``test_*.py``, ``*_test.py``) would collect a file so named."""
    return name.endswith(".py") and (name.startswith("test_") or name.endswith("_test.py"))


def test_no_package_module_is_named_like_a_test_file() -> None:
    named = [str(path.relative_to(ROOT)) for path in sorted((ROOT / "pytest_dmlbench").rglob("*.py"))
             if named_like_a_test_file(path.name)]
    assert not named, f"package modules pytest would collect as tests (rename them): {named}"


def test_a_module_named_like_a_test_file_is_caught() -> None:
    """Negative control for the rule above."""
    assert named_like_a_test_file("block_test.py") and named_like_a_test_file("test_block.py")
    assert not named_like_a_test_file("significance.py")


TORCH_SUBCLASS = "pytest_dmlbench/world/simulated/process_group.py"  # subclasses torch's pybind ProcessGroup


def allowed_ignore(path: str, line: str) -> bool:
    """The silencing allowed in the package, all of it where torch's typing falls short: calls into untyped
    functions of torch and Ray (``Tensor.backward``, ``torch.cuda.nccl.version``; typed in some versions,
    hence ``unused-ignore`` beside some), attributes torch's stubs lack (``td.TCPStore``,
    ``torch.utils.deterministic``), and the overrides of the simulated process group, whose base class is a
    pybind class mypy reads with other signatures."""
    if "# type: ignore[no-untyped-call" in line:
        return True
    if "# type: ignore[attr-defined" in line:
        return "td." in line or "torch." in line
    return path == TORCH_SUBCLASS and any(f"# type: ignore[{code}]" in line
                                          for code in ("override", "assignment", "call-arg"))


def test_type_ignores_only_where_torch_typing_falls_short() -> None:
    found = [f"{path.relative_to(ROOT)}:{number}: {line.strip()}"
             for path in sorted((ROOT / "pytest_dmlbench").rglob("*.py"))
             for number, line in enumerate(path.read_text().splitlines(), 1)
             if "type: ignore" in line and not allowed_ignore(str(path.relative_to(ROOT)), line)]
    assert not found, "type: ignore beyond torch's typing gaps:\n" + "\n".join(found)


def test_an_ignore_of_our_own_code_is_not_allowed() -> None:
    """Negative control for the rule above."""
    assert not allowed_ignore("pytest_dmlbench/x.py", "exc.extra = 1  # type: ignore[attr-defined]")
    assert not allowed_ignore("pytest_dmlbench/x.py", "def f(self): ...  # type: ignore[override]")
    assert not allowed_ignore("pytest_dmlbench/x.py", "return thing  # type: ignore")


def _imports(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module.split(".")[0])
    return names


def test_only_the_pytest_facing_modules_import_pytest() -> None:
    package = ROOT / "pytest_dmlbench"
    assert all((package / name).is_file() for name in PYTEST_FACING), "PYTEST_FACING names a missing module"
    offenders = [str(f.relative_to(package)) for f in sorted(package.rglob("*.py"))
                 if str(f.relative_to(package)) not in PYTEST_FACING and {"pytest", "_pytest"} & _imports(f)]
    assert not offenders, f"modules that are not pytest-facing import pytest: {offenders}"


def test_a_pytest_import_outside_the_face_is_caught(tmp_path: Path) -> None:
    """Negative control: the import scan sees a function-level pytest import."""
    module = tmp_path / "m.py"
    module.write_text("def f():\n    from _pytest.config import Config\n")
    assert "_pytest" in _imports(module)


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
    # the one line that runs the tests; `|| status=$?` keeps its exit status while the timings are printed
    runs = [line for line in ci_script if line.startswith("python -m pytest ")]
    assert len(runs) == 1, f".ci/run should run the tests on one line, found {runs}"
    command = runs[0].removesuffix(" || status=$?").replace("python -m pytest", "pytest")  # the venv's pytest
    assert f"&& {command}\n" in readme, f"README does not end its test command with {command!r}"
