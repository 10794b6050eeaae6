"""``studies/gpu_paths.py`` on every CUDA device of the host (collected everywhere, skipped with the reason on a host
with fewer than 2): NCCL between 2+ ranks, busbw, ``peak_cuda_mb``, the CUDA out-of-memory search, equivalence
on NCCL and ``set_device`` per rank, each reported passed."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.gpu_host import host_env, needs_gpus

ROOT = Path(__file__).resolve().parents[2]
pytestmark = needs_gpus(2)


def test_every_gpu_path_passes_between_the_hosts_devices() -> None:
    done = subprocess.run([sys.executable, "-m", "studies.gpu_paths"], env=host_env(), cwd=ROOT,
                          capture_output=True, text=True, timeout=660, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "FAILED" not in done.stdout and " not run " not in done.stdout, done.stdout
