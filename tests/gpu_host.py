"""The CUDA devices of the host the tests run on, counted without initialising CUDA in the test process.

The suite hides GPUs from itself (``tests/conftest.py`` sets ``CUDA_VISIBLE_DEVICES=""``) so that it passes alike
with and without them; it keeps the host's own setting in ``HOST_VISIBLE_VAR`` first, for xdist workers too. The
GPU tests (``tests/gpu``) are collected on every host and skipped with the reason unless the host has the devices
they need; they run their cases in subprocesses given the host's environment (:func:`host_env`).
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable, Mapping
from functools import cache
from pathlib import Path

import pytest

HOST_VISIBLE_VAR = "DMLBENCH_HOST_CUDA_VISIBLE_DEVICES"
"""The host's ``CUDA_VISIBLE_DEVICES`` before the suite hid the GPUs (``UNSET`` when it had none)."""
UNSET = "<unset>"
DRIVER_GPUS = Path("/proc/driver/nvidia/gpus")
"""One folder per GPU the NVIDIA driver runs; absent without the driver."""
COUNT_CODE = "import torch; print(torch.cuda.device_count())"


def remember_host_setting(environ: dict[str, str] | os._Environ[str]) -> None:
    """Keep the host's ``CUDA_VISIBLE_DEVICES`` (once: an xdist worker inherits the controller's record)."""
    environ.setdefault(HOST_VISIBLE_VAR, environ.get("CUDA_VISIBLE_DEVICES", UNSET))


def host_env(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """``environ`` (default: this process's) with the host's ``CUDA_VISIBLE_DEVICES`` put back."""
    env = dict(os.environ if environ is None else environ)
    host = env.get(HOST_VISIBLE_VAR, env.get("CUDA_VISIBLE_DEVICES", UNSET))
    if host == UNSET:
        env.pop("CUDA_VISIBLE_DEVICES", None)
    else:
        env["CUDA_VISIBLE_DEVICES"] = host
    return env


def count_in_subprocess(env: dict[str, str]) -> int:
    """``torch.cuda.device_count()`` in a new interpreter with ``env`` (its CUDA state dies with it)."""
    done = subprocess.run([sys.executable, "-c", COUNT_CODE], env=env, capture_output=True, text=True,
                          timeout=300, check=False)
    last = done.stdout.strip().splitlines()[-1:] or [""]
    if done.returncode != 0 or not last[0].isdigit():
        raise RuntimeError(f"counting the host's CUDA devices ({sys.executable} -c {COUNT_CODE!r}) failed with "
                           f"status {done.returncode}:\n{done.stdout}{done.stderr}\nfix the NVIDIA driver or CUDA "
                           "build (nvidia-smi), or hide the GPUs with CUDA_VISIBLE_DEVICES=")
    return int(last[0])


def count_host_devices(env: dict[str, str], driver_gpus: Path = DRIVER_GPUS,
                       count: Callable[[dict[str, str]], int] = count_in_subprocess) -> int:
    """The CUDA devices a process with ``env`` sees: 0 at once where the host hides them or runs no NVIDIA
    driver (no subprocess: the common CPU host pays nothing), else counted by ``count``."""
    visible = env.get("CUDA_VISIBLE_DEVICES")
    if visible is not None and visible.strip() in ("", "-1"):
        return 0
    if not driver_gpus.is_dir() or not any(driver_gpus.iterdir()):
        return 0
    return count(env)


@cache
def host_devices() -> int:
    """This host's CUDA devices (cached for the session)."""
    return count_host_devices(host_env())


def skip_reason(needed: int, found: int) -> str | None:
    """Why a test that needs ``needed`` CUDA devices is skipped on a host with ``found``; None when it runs."""
    if found >= needed:
        return None
    what = "a CUDA device" if needed == 1 else f"{needed} CUDA devices (NCCL between {needed} ranks)"
    return (f"needs {what}; this host has {found} (counted with the host's CUDA_VISIBLE_DEVICES, "
            f"{DRIVER_GPUS} and torch.cuda.device_count())")


def needs_gpus(needed: int) -> pytest.MarkDecorator:
    """Skip unless this host has ``needed`` CUDA devices, with the reason."""
    found = host_devices()
    reason = skip_reason(needed, found)
    return pytest.mark.skipif(reason is not None, reason=reason or "")
