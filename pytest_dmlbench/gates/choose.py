"""Choosing the run's gate once, at configure time: paired with ``--dmlbench-against REF``, else stored.

Usage errors (a bad REF, options that cannot go together) surface here as ``pytest.UsageError``, before
any case runs.
"""

from __future__ import annotations

from typing import Any

import pytest

from pytest_dmlbench.config import DmlbenchConfig
from pytest_dmlbench.gates.gate import Gate


def choose_gate(config: pytest.Config, settings: DmlbenchConfig, run: dict[str, Any], launched: bool) -> Gate:
    """The gate for this run (``launched``: under an external launcher such as torchrun)."""
    if settings.against is None:
        from pytest_dmlbench.gates.stored.gate import StoredGate

        return StoredGate(settings, run)
    from pytest_dmlbench.errors import ConfigError, RefError
    from pytest_dmlbench.gates.paired.gate import PairedGate
    from pytest_dmlbench.gates.paired.launch import own_launch, prepare

    if launched:
        raise pytest.UsageError("--dmlbench-against does not run under an external launcher (torchrun); "
                                "run pytest directly and let the plugin start the ranks")
    try:
        launch, tree = prepare(config, settings, settings.against)
    except (RefError, ConfigError) as exc:
        raise pytest.UsageError(str(exc)) from None
    return PairedGate(settings, launch, tree, own_launch(config, settings, launch))
