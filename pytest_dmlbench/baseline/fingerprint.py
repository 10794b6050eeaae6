"""Machine fingerprint and the machine key that names a baseline folder.

The fingerprint records what the figures depend on. Only the fields in ``KEY_FIELDS`` identify the machine
class and enter the key; drifting facts (clock frequency, free memory, boot time) are recorded for the
reader but never change the key, so a baseline stays usable while the CPU boosts or throttles.
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import re
from collections.abc import Mapping
from typing import Any

import psutil

from pytest_dmlbench.baseline.machine_facts import software_facts

KEY_FIELDS: tuple[str, ...] = (
    "cpu_model",
    "logical_cores",
    "memory_gib",
    "os",
    "kernel",
    "machine",
    "python",
    "torch",
    "cuda",
    "nccl",
    "gpus",
    "backend",
)
"""Fields that identify the machine class; everything else in a fingerprint is informational."""


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "unknown"


def _cpu_mhz() -> float | None:
    try:
        freq = psutil.cpu_freq()
    except (OSError, NotImplementedError):
        return None
    return round(freq.current, 1) if freq is not None else None


def _torch_facts() -> dict[str, Any]:
    """torch, CUDA and NCCL versions and GPU names; imported here so the plugin starts without torch.

    With GPUs present this initialises CUDA in the calling process: call it on a rank, or in a parent that
    starts its ranks with ``spawn`` (never fork after CUDA initialisation).
    """
    import torch

    facts: dict[str, Any] = {"torch": torch.__version__, "cuda": torch.version.cuda, "nccl": None, "gpus": []}
    if torch.cuda.is_available():
        facts["gpus"] = [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())]
        version = torch.cuda.nccl.version()  # type: ignore[no-untyped-call,unused-ignore]
        facts["nccl"] = (
            ".".join(str(part) for part in version) if isinstance(version, tuple) else str(version)
        )
    return facts


def machine_fingerprint(backend: str) -> dict[str, Any]:
    """Describe this machine and software stack for the given process-group backend (``gloo``/``nccl``)."""
    memory = psutil.virtual_memory()
    fingerprint: dict[str, Any] = {
        "cpu_model": _cpu_model(),
        "logical_cores": os.cpu_count() or 1,
        "memory_gib": round(memory.total / 2**30),
        "os": platform.system(),
        "kernel": platform.release(),
        "machine": platform.machine(),
        "python": platform.python_version(),
        **_torch_facts(),
        "backend": backend,
        # Informational only: these drift between runs of the same machine.
        "cpu_mhz": _cpu_mhz(),
        "available_memory_gib": round(memory.available / 2**30, 1),
        "boot_time": psutil.boot_time(),
        # Informational: the environment report's facts (software, GPUs, backends, distributed variables).
        **software_facts(),
    }
    return fingerprint


def _slug(text: str, limit: int) -> str:
    slug = re.sub(r"[^a-z0-9.]+", "-", text.lower()).strip("-")
    return slug[:limit].rstrip("-") or "unknown"


def _short_cpu(model: str) -> str:
    """The distinctive part of a CPU model name: 'xeon-gold-6230' from 'Intel(R) Xeon(R) Gold 6230 CPU'."""
    cleaned = re.sub(r"\((r|tm)\)|\bcpu\b|\bprocessor\b|@.*$|\bintel\b|\bamd\b", " ", model, flags=re.I)
    return _slug(cleaned, 24)


def machine_key(fingerprint: Mapping[str, Any]) -> str:
    """A stable folder name: readable slug plus a hash of the identifying fields.

    Example: ``linux-x86_64-xeon-2c-torch2.14.1-gloo-3f9a1c2b``. Fields missing from an older fingerprint
    count as null, so the key of a stored fingerprint is computed the same way as a fresh one.
    """
    identity = {name: fingerprint.get(name) for name in KEY_FIELDS}
    digest = hashlib.sha256(json.dumps(identity, sort_keys=True, default=str).encode()).hexdigest()[:8]
    parts = [
        _slug(str(identity["os"] or "unknown"), 12),
        _slug(str(identity["machine"] or "unknown"), 12).replace(".", ""),
        _short_cpu(str(identity["cpu_model"] or "unknown")),
        f"{identity['logical_cores']}c",
        "torch" + _slug(str(identity["torch"] or "none"), 16),
        _slug(str(identity["backend"] or "none"), 8),
        digest,
    ]
    return "-".join(parts)
