"""The run's options are validated where they are read (``pytest_dmlbench/config.py``)."""

from __future__ import annotations

import math

import pytest

from pytest_dmlbench.config import parse_cpu_threshold, parse_threshold
from pytest_dmlbench.errors import ConfigError


@pytest.mark.parametrize("bad", [-1.0, math.nan, math.inf, "abc", True])
def test_bad_threshold_is_a_config_error(bad: object) -> None:
    with pytest.raises(ConfigError, match=r"percentage; give a number >= 0|finite percentage >= 0"):
        parse_threshold(bad, "--dmlbench-cpu-threshold")
    assert parse_threshold("10%", "--dmlbench-cpu-threshold") == 10.0  # negative control: a good value passes


@pytest.mark.parametrize(("given", "read"), [("off", "off"), (" OFF ", "off"), ("2.5%", 2.5), (0, 0.0)])
def test_a_cpu_threshold_is_a_percentage_or_off(given: object, read: object) -> None:
    assert parse_cpu_threshold(given, "--dmlbench-cpu-threshold") == read


@pytest.mark.parametrize("bad", ["of", "none", -2, True])
def test_a_bad_cpu_threshold_names_off_among_the_accepted(bad: object) -> None:
    with pytest.raises(ConfigError, match=r"^--dmlbench-cpu-threshold: .*, or off to leave CPU time unjudged$"):
        parse_cpu_threshold(bad, "--dmlbench-cpu-threshold")
