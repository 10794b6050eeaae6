"""``--dmlbench-strict`` and the marker's ``strict=``: parsed strictly, the marker beats the run, off unless asked
for (the inner run of ``test_strict_vs_gloo.py`` shows both reaching the simulated engine)."""

from __future__ import annotations

import re
from dataclasses import replace
from pathlib import Path

import pytest

from pytest_dmlbench.config import DEFAULT_STRICT, DmlbenchConfig, case_settings, parse_strict
from pytest_dmlbench.errors import ConfigError


def _run(strict: bool) -> DmlbenchConfig:
    return replace(DmlbenchConfig(enabled=True, world_size=2, backend="auto", timeout_s=60.0, threshold_pct=10.0,
                                  save=False, compare=False, baseline_dir=Path("b"), json_path=None,
                                  fail_on_improvement=False), strict=strict)


def test_a_strict_mode_is_on_or_off_and_anything_else_names_the_choices() -> None:
    assert parse_strict(" On ") is True and parse_strict("off") is False
    assert DEFAULT_STRICT == "off"  # the measured default: docs/how-to/strict-mode.md
    with pytest.raises(ConfigError, match=re.escape("--dmlbench-strict: 'yes' is not a strict mode; choose one of "
                                                    "on, off")):
        parse_strict("yes")


def test_the_marker_beats_the_run_and_takes_only_a_bool() -> None:
    assert case_settings({}, _run(True), "case").strict is True
    assert case_settings({}, _run(False), "case").strict is False
    assert case_settings({"strict": False}, _run(True), "case").strict is False
    assert case_settings({"strict": True}, _run(False), "case").strict is True
    with pytest.raises(ConfigError, match=re.escape("case: strict= 'on' must be True or False")):
        case_settings({"strict": "on"}, _run(False), "case")
