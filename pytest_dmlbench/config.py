"""The run's validated configuration: parsed once from options/ini, kept in ``config.stash``."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pytest_dmlbench.errors import ConfigError

BACKENDS = ("auto", "gloo", "nccl")
DEFAULT_WORLD_SIZE = 2
DEFAULT_TIMEOUT_S = 120.0
DEFAULT_THRESHOLD_PCT = 10.0


def parse_world_size(value: Any, source: str = "--world-size") -> int:
    """An integer >= 1."""
    text = str(value).strip()
    try:
        number = int(text)
    except ValueError:
        raise ConfigError(
            f"{source}: {value!r} is not a whole number; give an integer >= 1, e.g. {source} 4"
        ) from None
    if number < 1:
        raise ConfigError(f"{source}: {number} is too small; give an integer >= 1, e.g. {source} 4")
    return number


def parse_backend(value: Any, source: str = "--dmlbench-backend") -> str:
    """One of auto, gloo, nccl."""
    text = str(value).strip().lower()
    if text not in BACKENDS:
        raise ConfigError(f"{source}: {value!r} is not a backend; choose one of {', '.join(BACKENDS)}")
    return text


def parse_positive_seconds(value: Any, source: str = "--dmlbench-timeout") -> float:
    """A finite number of seconds > 0."""
    try:
        number = float(str(value).strip())
    except ValueError:
        raise ConfigError(
            f"{source}: {value!r} is not a number of seconds; give a value > 0, e.g. {source} 60"
        ) from None
    if not math.isfinite(number) or number <= 0:
        raise ConfigError(f"{source}: {value!r} must be a finite number of seconds > 0, e.g. {source} 60")
    return number


def parse_threshold(value: Any, source: str = "--dmlbench-threshold") -> float:
    """A percentage >= 0 (10 means 10 %)."""
    try:
        number = float(str(value).strip().rstrip("%"))
    except ValueError:
        raise ConfigError(f"{source}: {value!r} is not a percentage; give a number >= 0, e.g. {source} 10") from None
    if not math.isfinite(number) or number < 0:
        raise ConfigError(f"{source}: {value!r} must be a finite percentage >= 0, e.g. {source} 10")
    return number


@dataclass(frozen=True)
class DmlbenchConfig:
    """Every option of the plugin, validated."""

    enabled: bool
    world_size: int
    backend: str
    timeout_s: float
    threshold_pct: float
    save: bool
    compare: bool
    baseline_dir: Path
    json_path: Path | None
    fail_on_improvement: bool
    against: str | None = None  # --dmlbench-against REF: the paired gate (stored baselines not compared)


@dataclass(frozen=True)
class CaseSettings:
    """The marker's settings for one case, merged over the run's defaults."""

    world_size: int
    backend: str
    timeout_s: float
    threshold_pct: float | None
    scaling: bool


SCALING_ARG = "dmlbench_world_size"  # the parameter ``scaling=True`` adds (ids ws1, ws2, ...)
MARKER_KEYS = ("world_size", "backend", "timeout", "threshold", "scaling")


def case_settings(marker_kwargs: dict[str, Any], defaults: DmlbenchConfig, where: str) -> CaseSettings:
    """Validate ``@pytest.mark.dmlbench(...)`` keyword arguments; ``where`` names the case in errors."""
    unknown = sorted(set(marker_kwargs) - set(MARKER_KEYS))
    if unknown:
        raise ConfigError(
            f"{where}: unknown dmlbench marker argument(s) {', '.join(unknown)}; accepted: {', '.join(MARKER_KEYS)}"
        )
    ws = marker_kwargs.get("world_size")
    backend = marker_kwargs.get("backend")
    timeout = marker_kwargs.get("timeout")
    threshold = marker_kwargs.get("threshold")
    return CaseSettings(
        world_size=defaults.world_size if ws is None else parse_world_size(ws, f"{where}: world_size="),
        backend=defaults.backend if backend is None else parse_backend(backend, f"{where}: backend="),
        timeout_s=defaults.timeout_s if timeout is None else parse_positive_seconds(timeout, f"{where}: timeout="),
        threshold_pct=None if threshold is None else parse_threshold(threshold, f"{where}: threshold="),
        scaling=bool(marker_kwargs.get("scaling", False)),
    )


def xdist_worker_count(numprocesses: object, environ: Mapping[str, str], cores: int) -> int:
    """How many pytest-xdist workers share the machine: an xdist worker reads its environment, the
    controller its ``-n`` value (``auto``/``logical`` meaning one per core); 1 without xdist."""
    count = environ.get("PYTEST_XDIST_WORKER_COUNT", "")
    if count.isdigit():
        return max(1, int(count))
    if isinstance(numprocesses, int) and numprocesses > 0:
        return numprocesses
    if numprocesses in ("auto", "logical"):
        return cores
    return 1


def scaling_world_sizes(max_world_size: int) -> list[int]:
    """1, 2, 4, ... up to ``max_world_size`` (which is included even when not a power of two)."""
    sizes = []
    n = 1
    while n < max_world_size:
        sizes.append(n)
        n *= 2
    sizes.append(max_world_size)
    return sizes
