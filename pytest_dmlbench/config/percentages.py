"""The one rule for a threshold given in percent (options, ini values, marker arguments, per-case files)."""

from __future__ import annotations

import math
from typing import Any

from pytest_dmlbench.errors import ConfigError


def parse_threshold(value: Any, source: str = "--dmlbench-threshold") -> float:
    """A percentage >= 0 (10 means 10 %), given as a number or a string such as ``"10"`` or ``"10%"``."""
    if isinstance(value, bool):
        raise ConfigError(f"{source}: {value!r} is not a percentage; give a number >= 0, e.g. {source} 10")
    try:
        number = float(str(value).strip().rstrip("%"))
    except ValueError:
        raise ConfigError(f"{source}: {value!r} is not a percentage; give a number >= 0, e.g. {source} 10") from None
    if not math.isfinite(number) or number < 0:
        raise ConfigError(f"{source}: {value!r} must be a finite percentage >= 0, e.g. {source} 10")
    return number
