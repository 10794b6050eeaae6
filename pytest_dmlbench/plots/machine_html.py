"""The machine section of ``report.html``: the results file's fingerprint as a readable table.

Each fact gets a name a person reads (``boot_time`` -> "booted"), times are dates (UTC), sizes carry
their units, lists are joined and missing values say so; a fact this module does not know is named from
its key (``scratch_bytes`` -> "scratch bytes") with its value as written.
"""

from __future__ import annotations

import html
import math
from collections.abc import Callable, Mapping
from datetime import datetime, timezone
from typing import Any

from pytest_dmlbench.results.units import format_number, format_quantity


def _date(value: Any) -> str:
    if isinstance(value, int | float) and math.isfinite(value) and value > 0:
        return datetime.fromtimestamp(value, timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    return _plain(value)


def _gib(value: Any) -> str:
    return f"{format_number(float(value))} GiB" if isinstance(value, int | float) else _plain(value)


def _mhz(value: Any) -> str:
    return f"{float(value):.0f} MHz" if isinstance(value, int | float) else _plain(value)


def _plain(value: Any) -> str:
    """Any value without Python's reprs: None -> "none", lists joined, numbers in the one number format."""
    if value is None or value == [] or value == "":
        return "none"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int | float):
        return format_number(float(value))
    if isinstance(value, list | tuple):
        return ", ".join(_plain(v) for v in value)
    if isinstance(value, Mapping):
        return "; ".join(f"{k}: {_plain(v)}" for k, v in value.items()) or "none"
    return str(value)


def _gpu_details(value: Any) -> str:
    """``0: NVIDIA H200, 143.8 GB, compute 9.0`` per device, or "none"."""
    if not isinstance(value, list) or not all(isinstance(d, Mapping) for d in value):
        return _plain(value)
    return "; ".join(f"{d.get('index', '?')}: {d.get('name', '?')}, {_plain(d.get('memory_gb'))} GB, "
                     f"compute {d.get('capability', '?')}" for d in value) or "none"


def _available(value: Any) -> str:
    """The names of the backends marked available (``gloo, mpi``), or "none"."""
    if not isinstance(value, Mapping):
        return _plain(value)
    return ", ".join(name for name, ok in value.items() if ok) or "none"


def label(key: str) -> str:
    """A fact this module does not know, named from its key: ``scratch_bytes`` -> "scratch bytes"."""
    return key.replace("_", " ")


KNOWN: dict[str, tuple[str, Callable[[Any], str]]] = {
    "cpu_model": ("CPU", _plain),
    "logical_cores": ("logical cores", _plain),
    "cpu_mhz": ("CPU clock", _mhz),
    "memory_gib": ("memory", _gib),
    "available_memory_gib": ("memory available at the start", _gib),
    "os": ("operating system", _plain),
    "kernel": ("kernel", _plain),
    "machine": ("architecture", _plain),
    "python": ("Python", _plain),
    "torch": ("torch", _plain),
    "cuda": ("CUDA (torch built with)", _plain),
    "nccl": ("NCCL", _plain),
    "gpus": ("GPUs", _plain),
    "backend": ("backend", _plain),
    "boot_time": ("booted", _date),
    "physical_cores": ("physical cores", _plain),
    "platform": ("platform", _plain),
    "torchvision": ("torchvision", _plain),
    "cudnn": ("cuDNN", _plain),
    "gpu_details": ("GPU details", _gpu_details),
    "backends_available": ("backends available", _available),
    "distributed_env": ("distributed variables", _plain),
}
"""Fingerprint key -> (row name, formatter), in the order the table lists them."""


def readable(key: str, value: Any) -> tuple[str, str]:
    """(row name, value text) of one fingerprint fact."""
    if key in KNOWN:
        name, show = KNOWN[key]
        return name, show(value)
    if key.endswith("_bytes") and isinstance(value, int | float):
        return label(key), format_quantity(float(value), "bytes")
    if key.endswith(("_time", "_at")):
        return label(key), _date(value)
    return label(key), _plain(value)


def machine_table(machine: Mapping[str, Any]) -> str:
    """The fingerprint as a two-column HTML table, known facts first in :data:`KNOWN`'s order."""
    keys = [k for k in KNOWN if k in machine] + sorted(k for k in machine if k not in KNOWN)
    rows = [f"<tr><th>{html.escape(name)}</th><td>{html.escape(text)}</td></tr>"
            for name, text in (readable(k, machine[k]) for k in keys)]
    if not rows:
        return "<p>The results file records no machine.</p>"
    return '<table class="machine">' + "\n".join(rows) + "</table>"
