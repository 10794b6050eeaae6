"""Simulated ranks run only on the torch series they were tested with (``compat.TESTED_SERIES``); the plugin
makes their cases skips elsewhere. These tests call the simulated world directly, so they skip the same way
on another torch (on torch 2.3.1, the declared floor, DDP's parameter check deadlocks the rank threads);
the guard's own tests run everywhere."""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_dmlbench.world.simulated.compat import incompatibility

HERE = Path(__file__).parent
GUARD_TESTS = ("test_another_torch_series_is_a_skip_naming_the_difference",)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    reason = incompatibility()
    if not reason:
        return
    for item in items:
        if item.path.is_relative_to(HERE) and item.name not in GUARD_TESTS:
            item.add_marker(pytest.mark.skip(reason=reason))
