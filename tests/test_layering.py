"""Every import points down the layers, and no two parts of the package import each other.

A *part* is a top-level package or module of ``pytest_dmlbench`` (``world``, ``gates``, ``plugin``, ...).
Every part sits on one layer; a module may import from its own part, from parts of lower layers, and from
parts of its own layer as long as the parts' import graph stays free of circles. Function-level imports
count. The layers are those of the layout in docs/explanation/how-it-works.md and the README.

Inside ``world``, each engine has a folder (``WORLD_ENGINES``) on the shared contract (the modules directly in
``world/``): the contract imports no engine, and no engine imports another.
"""

from __future__ import annotations

import ast
import shutil
from collections.abc import Mapping
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "pytest_dmlbench"

# Lowest first: what each floor is for, and its parts.
LAYERS: list[tuple[str, tuple[str, ...]]] = [
    ("the error classes every floor raises", ("errors",)),
    ("results and what shows them; the validated options; data sets",
     ("results", "config", "data")),
    ("rank-side measurement and the property lockstep", ("measure", "properties")),
    ("the training library", ("strategies", "robust", "training", "sweeps")),
    ("the world engine", ("world",)),
    ("judging: baselines, the gates, drift", ("baseline", "gates", "drift")),
    ("tools over results: environment report, plots, projection", ("envreport", "plots", "projection")),
    ("the pytest face and the command line",
     ("plugin", "items", "reporting", "pytest_internals", "experiments", "block_server", "cli", "__main__",
      # kept import paths, each the same module object as its new home
      "comm", "models", "reference", "stats", "case_results")),
]
KEPT_PATHS = ("comm", "models", "reference", "stats", "case_results")
WORLD_ENGINES = ("forked", "ray", "launched", "simulated")


def layer_of(part: str) -> int:
    for index, (_, parts) in enumerate(LAYERS):
        if part in parts:
            return index
    raise AssertionError(f"pytest_dmlbench.{part} is on no layer: add it to LAYERS in {Path(__file__).name}")


def dotted_modules(package: Path) -> dict[str, Path]:
    """``{"world.engine": path, "world": path-of-__init__, ...}`` for every module of the package."""
    found = {}
    for path in sorted(package.rglob("*.py")):
        dotted = ".".join(path.relative_to(package).with_suffix("").parts).removesuffix(".__init__")
        if dotted != "__init__":
            found[dotted] = path
    return found


def imported_modules(path: Path, known: Mapping[str, Path]) -> set[str]:
    """The package's modules that ``path`` imports anywhere in its body (``from pkg import submodule`` is the
    submodule; ``from module import name`` is the module)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == "pytest_dmlbench":
            base = node.module.removeprefix("pytest_dmlbench").lstrip(".")
            for alias in node.names:
                submodule = f"{base}.{alias.name}" if base else alias.name
                found.add(submodule if submodule in known else base)
        elif isinstance(node, ast.Import):
            found.update(alias.name.removeprefix("pytest_dmlbench.") for alias in node.names
                         if alias.name.startswith("pytest_dmlbench."))
    found.discard("")
    return found


def part_of(module: str) -> str:
    return module.split(".")[0]


def part_graph(package: Path) -> dict[str, set[str]]:
    """Which parts each part imports (other than itself)."""
    known = dotted_modules(package)
    graph: dict[str, set[str]] = {part_of(module): set() for module in known}
    for module, path in known.items():
        graph[part_of(module)].update(part_of(name) for name in imported_modules(path, known))
    for part, targets in graph.items():
        targets.discard(part)
    return graph


def upward_imports(package: Path) -> list[str]:
    known = dotted_modules(package)
    found = []
    for module, path in known.items():
        own = layer_of(part_of(module))
        for name in sorted(imported_modules(path, known)):
            if layer_of(part_of(name)) > own:
                found.append(f"pytest_dmlbench.{module} (layer {own}) imports pytest_dmlbench.{name} "
                             f"(layer {layer_of(part_of(name))})")
    return found


def circles(graph: Mapping[str, set[str]]) -> list[list[str]]:
    """The strongly connected groups of more than one node (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in sorted(graph.get(node, ())):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            group = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                group.append(member)
                if member == node:
                    break
            if len(group) > 1:
                found.append(sorted(group))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def module_graph(package: Path) -> dict[str, set[str]]:
    known = dotted_modules(package)
    return {module: imported_modules(path, known) - {module} for module, path in known.items()}


def engine_of(module: str) -> str | None:
    """The world engine whose folder holds ``module`` (``"world.ray.rank"`` -> ``"ray"``), else None."""
    parts = module.split(".")
    return parts[1] if parts[0] == "world" and len(parts) > 1 and parts[1] in WORLD_ENGINES else None


def cross_engine_imports(package: Path) -> list[str]:
    """World modules importing an engine folder other than their own (the shared contract has none)."""
    found = []
    for module, imports in module_graph(package).items():
        if part_of(module) != "world":
            continue
        for name in sorted(imports):
            target = engine_of(name)
            if target is not None and target != engine_of(module):
                found.append(f"pytest_dmlbench.{module} imports pytest_dmlbench.{name}")
    return found


def test_every_part_is_on_a_layer() -> None:
    for part in part_graph(PACKAGE):
        layer_of(part)
    stale = [part for _, parts in LAYERS for part in parts
             if not (PACKAGE / part).is_dir() and not (PACKAGE / f"{part}.py").is_file()]
    assert not stale, f"LAYERS names parts that do not exist: {stale}"


def test_no_import_points_up() -> None:
    assert not upward_imports(PACKAGE)


def test_no_two_parts_import_each_other() -> None:
    assert not circles(part_graph(PACKAGE))


def test_no_two_modules_import_each_other() -> None:
    """Within a part too (a package's ``__init__`` re-exporting its own modules is no circle unless they
    import the ``__init__`` back)."""
    assert not circles(module_graph(PACKAGE))


def test_the_package_root_and_the_kept_paths_import_nothing_of_their_own() -> None:
    known = dotted_modules(PACKAGE)
    assert imported_modules(PACKAGE / "__init__.py", known) == set()
    importers = {module: sorted(set(KEPT_PATHS) & imports) for module, imports in module_graph(PACKAGE).items()}
    assert not {module: names for module, names in importers.items() if names}, "the package uses a kept path"


@pytest.mark.parametrize(("old", "new"), [("comm", "measure.comm"), ("models", "training.models"),
                                          ("reference", "training.reference"), ("stats", "results.stats"),
                                          ("case_results", "items.case_results")])
def test_a_kept_import_path_is_the_module_itself_and_warns_that_it_goes(old: str, new: str) -> None:
    """In a fresh interpreter: a process warns once, at the first import of the old path."""
    import subprocess
    import sys

    probe = (f"import importlib, warnings\nwarnings.simplefilter('error')\n"
             f"new = importlib.import_module('pytest_dmlbench.{new}')  # the new path: no warning\n"
             f"warnings.simplefilter('always')\n"
             f"with warnings.catch_warnings(record=True) as seen:\n"
             f"    assert importlib.import_module('pytest_dmlbench.{old}') is new\n"
             f"print([(w.category.__name__, str(w.message)) for w in seen])\n")
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == repr([("DeprecationWarning", f"pytest_dmlbench.{old} is deprecated and goes in "
                                         f"pytest-dmlbench 1.0: import pytest_dmlbench.{new} instead (the same "
                                         "module)")])


def test_the_results_model_stands_on_the_statistics_alone() -> None:
    known = dotted_modules(PACKAGE)
    assert imported_modules(PACKAGE / "results" / "__init__.py", known) == {"results.stats"}
    assert imported_modules(PACKAGE / "results" / "stats.py", known) == set()


@pytest.fixture
def package_copy(tmp_path: Path) -> Path:
    copy = tmp_path / "pytest_dmlbench"
    shutil.copytree(PACKAGE, copy, ignore=shutil.ignore_patterns("__pycache__"))
    return copy


def test_an_upward_import_is_caught(package_copy: Path) -> None:
    """Negative control: the clock importing the world engine (layer 2 -> 4) inside a function."""
    with (package_copy / "measure" / "clock.py").open("a") as clock:
        clock.write("\n\ndef _f() -> None:\n    from pytest_dmlbench.world.engine import Engine  # noqa: F401\n")
    assert upward_imports(package_copy) == [
        "pytest_dmlbench.measure.clock (layer 2) imports pytest_dmlbench.world.engine (layer 4)"
    ]
    assert ["measure", "world"] in circles(part_graph(package_copy))


def test_each_world_engine_stands_on_the_shared_contract_alone() -> None:
    assert all((PACKAGE / "world" / engine / "__init__.py").is_file() for engine in WORLD_ENGINES)
    assert not cross_engine_imports(PACKAGE)


def test_an_import_across_world_engines_is_caught(package_copy: Path) -> None:
    """Negative control: the Ray engine importing the forked pool, and the shared dispatch importing Ray's
    world inside a function. Both stay inside the ``world`` part, so the part layering alone misses them."""
    with (package_copy / "world" / "ray" / "engine.py").open("a") as engine:
        engine.write("\nfrom pytest_dmlbench.world.forked.pool import WorldPool  # noqa: E402,F401\n")
    with (package_copy / "world" / "dispatch.py").open("a") as dispatch:
        dispatch.write("\n\ndef _f() -> None:\n    from pytest_dmlbench.world.ray import world  # noqa: F401\n")
    assert not upward_imports(package_copy)
    assert cross_engine_imports(package_copy) == [
        "pytest_dmlbench.world.dispatch imports pytest_dmlbench.world.ray.world",
        "pytest_dmlbench.world.ray.engine imports pytest_dmlbench.world.forked.pool",
    ]


def test_a_circle_within_one_layer_is_caught(package_copy: Path) -> None:
    """Negative control: the baseline store importing the gates' wording. Both parts are on one layer, so no
    import points up; the gates import the baseline, so the two parts now import each other."""
    with (package_copy / "baseline" / "store.py").open("a") as store:
        store.write("\nfrom pytest_dmlbench.gates.wording import word  # noqa: E402,F401\n")
    assert not upward_imports(package_copy)
    assert circles(part_graph(package_copy)) == [["baseline", "gates"]]


def test_a_submodule_imported_from_its_package_is_that_module(tmp_path: Path) -> None:
    known = {"robust": Path(), "robust.pre": Path()}
    source = tmp_path / "m.py"
    source.write_text("from pytest_dmlbench.robust import pre, aggregate\n")
    assert imported_modules(source, known) == {"robust.pre", "robust"}
