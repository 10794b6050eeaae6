"""The run's options are validated where they are read (``pytest_dmlbench/config.py``)."""

from __future__ import annotations

import math

import pytest

from pytest_dmlbench.config import parse_threshold
from pytest_dmlbench.errors import ConfigError


@pytest.mark.parametrize("bad", [-1.0, math.nan, math.inf, "abc", True])
def test_bad_threshold_is_a_config_error(bad: object) -> None:
    with pytest.raises(ConfigError, match=r"percentage; give a number >= 0|finite percentage >= 0"):
        parse_threshold(bad, "--dmlbench-cpu-threshold")
    assert parse_threshold("10%", "--dmlbench-cpu-threshold") == 10.0  # negative control: a good value passes
