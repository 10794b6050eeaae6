"""Switching the paired gate on: validate ``--dmlbench-against``, prepare REF, register the plugin object."""

from __future__ import annotations

from typing import Any

import pytest

from pytest_dmlbench.config import DmlbenchConfig


def register_paired_gate(config: pytest.Config, settings: DmlbenchConfig, result_key: pytest.StashKey[Any],
                         settings_key: pytest.StashKey[Any], launched: bool) -> None:
    """Usage errors (bad REF, incompatible options) surface here, before any case runs."""
    from pytest_dmlbench.paired.gate import PairedGate
    from pytest_dmlbench.paired.launch import prepare
    from pytest_dmlbench.paired.worktree import RefError

    assert settings.against is not None
    if launched:
        raise pytest.UsageError("--dmlbench-against does not run under an external launcher (torchrun); "
                                "run pytest directly and let the plugin start the ranks")
    try:
        launch, tree = prepare(config, settings, settings.against)
    except RefError as exc:
        raise pytest.UsageError(str(exc)) from None
    config.pluginmanager.register(PairedGate(config, settings, launch, tree, result_key, settings_key),
                                  "dmlbench-paired")
