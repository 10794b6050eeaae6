"""The design card's commands at the repository root: `pytest --dmlbench --world-size 4` collects the
benchmark and correctness cases, `pytest tests` the plugin's own tests."""

from __future__ import annotations

import functools
from pathlib import Path

from tests.conftest import clean_env, python_m_pytest

ROOT = Path(__file__).resolve().parents[1]


@functools.cache
def collected_nodeids(*args: str) -> tuple[str, ...]:
    """Node ids ``pytest --collect-only -q ARGS`` lists at the repository root (collected once per process:
    the README's counts and the root command ask for the same collection)."""
    arguments = ["-p", "no:cacheprovider", "-p", "no:randomly", "--collect-only", "-q", *args]
    proc = python_m_pytest(ROOT, arguments, clean_env(), timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return tuple(line for line in proc.stdout.splitlines() if "::" in line)


def test_the_root_command_collects_the_bench_cases() -> None:
    collected = collected_nodeids("--dmlbench", "--world-size", "4")
    assert collected, "no case collected"
    assert all(nodeid.startswith("bench_cases/") for nodeid in collected), collected[:5]


def test_naming_tests_collects_the_plugins_own_tests() -> None:
    collected = collected_nodeids("tests/world/test_options.py")
    assert collected and all(nodeid.startswith("tests/world/test_options.py::") for nodeid in collected)
