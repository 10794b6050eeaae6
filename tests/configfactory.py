"""A run's configuration as the plugin builds it, every option at its default unless given."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

from pytest_dmlbench.config import DEFAULT_THRESHOLD_PCT, DEFAULT_TIMEOUT_S, DEFAULT_WORLD_SIZE, DmlbenchConfig


def make_config(baseline_dir: Path, **changes: Any) -> DmlbenchConfig:
    """``--dmlbench`` with baselines under ``baseline_dir`` and ``changes`` applied (``save=True``, ...)."""
    config = DmlbenchConfig(enabled=True, world_size=DEFAULT_WORLD_SIZE, backend="auto", timeout_s=DEFAULT_TIMEOUT_S,
                            threshold_pct=DEFAULT_THRESHOLD_PCT, save=False, compare=True, baseline_dir=baseline_dir,
                            json_path=None, fail_on_improvement=False)
    return replace(config, **changes)
