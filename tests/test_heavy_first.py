"""The test command's heaviest modules are collected first (``tests/conftest.py``), so pytest-xdist's two workers
end together: every module named there exists, and the order puts them first while the rest keep theirs."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

from tests.conftest import HEAVY_FIRST, heavy_first

ROOT = Path(__file__).resolve().parents[1]


def test_every_heavy_module_exists() -> None:
    missing = [path for path in HEAVY_FIRST if not (ROOT / path).is_file()]
    assert not missing, f"HEAVY_FIRST names modules that no longer exist (moved or renamed?): {missing}"
    assert len(set(HEAVY_FIRST)) == len(HEAVY_FIRST)


def test_the_heavy_modules_come_first_in_their_order_and_the_rest_keep_theirs() -> None:
    nodeids = ["tests/a/test_a.py::test_1", f"{HEAVY_FIRST[1]}::test_x", "tests/b/test_b.py::test_2",
               f"{HEAVY_FIRST[0]}::test_y[1]", f"{HEAVY_FIRST[1]}::test_z", "tests/a/test_a.py::test_3"]
    items: list[Any] = [SimpleNamespace(nodeid=nodeid) for nodeid in nodeids]
    assert [item.nodeid for item in heavy_first(items)] == [
        f"{HEAVY_FIRST[0]}::test_y[1]", f"{HEAVY_FIRST[1]}::test_x", f"{HEAVY_FIRST[1]}::test_z",
        "tests/a/test_a.py::test_1", "tests/b/test_b.py::test_2", "tests/a/test_a.py::test_3"]
