"""The typed keys under which the plugin keeps its objects in pytest's stashes (config and items).

A module of its own so that the plugin, the paired gate's REF server and the item runner share them
without importing one another.
"""

from __future__ import annotations

import pytest

from pytest_dmlbench.config import CaseSettings, DmlbenchConfig
from pytest_dmlbench.gates.gate import Gate
from pytest_dmlbench.items.case_results import CaseResultBuilder, LocalMetrics
from pytest_dmlbench.results import CaseResult
from pytest_dmlbench.world.engine import Engine
from pytest_dmlbench.world.run_facts import RunFacts

# on the config
CONFIG_KEY = pytest.StashKey[DmlbenchConfig]()
FACTS_KEY = pytest.StashKey[RunFacts]()
ENGINE_KEY = pytest.StashKey[Engine]()
SIMULATED_ENGINE_KEY = pytest.StashKey[Engine]()  # cases marked launcher="simulated" in a run of another launcher
GATE_KEY = pytest.StashKey[Gate]()
BUILDER_KEY = pytest.StashKey[CaseResultBuilder]()
# on an item
SETTINGS_KEY = pytest.StashKey[CaseSettings]()
BACKEND_KEY = pytest.StashKey[str]()
RESULT_KEY = pytest.StashKey[CaseResult]()
LOCAL_METRICS_KEY = pytest.StashKey[LocalMetrics]()
