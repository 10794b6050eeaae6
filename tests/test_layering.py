"""The import graph points one way: from the plugin down to the results model and the pure statistics.

Every ``pytest_dmlbench`` module belongs to a layer; a module may import from its own layer and the layers
below it, never from a layer above (function-level imports included). Guards the shape described in
the layout section of docs/explanation/how-it-works.md.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "pytest_dmlbench"

# Lowest first. A module's layer is that of its longest matching prefix.
LAYERS: list[tuple[str, ...]] = [
    ("stats", "student_t", "errors", "units", "envreport.facts"),
    ("results", "dist_info", "config", "output_paths"),
    ("measure", "comm", "run_facts", "envreport.livecheck", "gates.wording", "gates.gate", "gates.paired_plan",
     "paired.statistics"),
    ("strategies", "robust", "models", "data", "reference", "bench", "sweeps"),
    ("world", "properties"),
    ("baseline", "drift"),
    ("case_results", "report", "results_reporter", "not_judged", "introspection", "cli", "__main__", "experiments",
     "table", "table_layout", "progress", "envreport", "plots", "projection", "gates.stored", "stash_keys",
     "item_case", "paired"),
    ("gates", "plugin"),
]


def layer_of(module: str) -> int:
    """The layer of ``pytest_dmlbench.<module>`` (dotted, without the package prefix)."""
    parts = module.split(".")
    for length in range(len(parts), 0, -1):
        prefix = ".".join(parts[:length])
        for index, names in enumerate(LAYERS):
            if prefix in names:
                return index
    raise AssertionError(f"pytest_dmlbench.{module} is in no layer: add it to LAYERS")


def package_imports(path: Path) -> set[str]:
    """Modules of the package that ``path`` imports anywhere in its body (without the package prefix)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("pytest_dmlbench"):
            base = node.module.removeprefix("pytest_dmlbench").lstrip(".")
            if base:
                found.add(base)
            else:  # from pytest_dmlbench import comm
                found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.Import):
            found.update(alias.name.removeprefix("pytest_dmlbench.") for alias in node.names
                         if alias.name.startswith("pytest_dmlbench."))
    return found


def modules() -> list[tuple[str, Path]]:
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        dotted = ".".join(path.relative_to(PACKAGE).with_suffix("").parts)
        if dotted == "__init__":  # the package root: checked to import nothing below
            continue
        found.append((dotted.removesuffix(".__init__"), path))
    return found


@pytest.mark.parametrize(("module", "path"), modules(), ids=[name for name, _ in modules()])
def test_no_import_points_up(module: str, path: Path) -> None:
    own = layer_of(module)
    upward = sorted(name for name in package_imports(path) if layer_of(name) > own)
    assert not upward, f"pytest_dmlbench.{module} (layer {own}) imports from higher layers: {upward}"


def test_the_package_root_imports_nothing() -> None:
    assert package_imports(PACKAGE / "__init__.py") == set()


def test_the_results_model_stands_on_the_statistics_alone() -> None:
    assert package_imports(PACKAGE / "results.py") == {"stats"}
    assert package_imports(PACKAGE / "stats.py") == set()


def test_an_upward_import_is_caught(tmp_path: Path) -> None:
    """Negative control: the checker sees a function-level import of the plugin from the results model."""
    bad = tmp_path / "results.py"
    bad.write_text("def f():\n    from pytest_dmlbench.plugin import CONFIG_KEY\n")
    assert {layer_of(name) for name in package_imports(bad)} == {layer_of("plugin")}
    assert layer_of("plugin") > layer_of("results")
