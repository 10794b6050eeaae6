"""The one rule for a threshold given in percent (options, ini values, marker arguments, per-case files)."""

from __future__ import annotations

import math
from typing import Any, Literal, TypeAlias

from pytest_dmlbench.errors import ConfigError

CPU_OFF: Literal["off"] = "off"
# A CPU-time threshold: percent, or "off" (CPU time recorded and not judged).
CpuThreshold: TypeAlias = float | Literal["off"]


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


def parse_cpu_threshold(value: Any, source: str = "--dmlbench-cpu-threshold") -> CpuThreshold:
    """A CPU-time threshold: a percentage as :func:`parse_threshold` reads it, or ``off`` (not judged)."""
    if isinstance(value, str) and value.strip().lower() == CPU_OFF:
        return CPU_OFF
    try:
        return parse_threshold(value, source)
    except ConfigError as problem:
        raise ConfigError(f"{problem}, or off to leave CPU time unjudged") from None
