"""The max-batch-size finder on a real GPU (collected on every host, skipped with the reason without a CUDA
device): the known-memory model against a CUDA memory budget, and against the device's whole memory through
real out-of-memory errors. The search runs in a subprocess given the host's GPUs (the suite hides them)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tests.gpu_host import host_env, needs_gpus

ROOT = Path(__file__).resolve().parents[2]
pytestmark = needs_gpus(1)

SEARCH = '''
import json, sys, torch
sys.path.insert(0, {root!r})
from pytest_dmlbench.sweeps import max_batch_size
from tests.sweeps.test_sweeps import SAMPLE, KnownMemoryModel
budget = max_batch_size(KnownMemoryModel(4.0), SAMPLE, device="cuda:0", memory_mb=400.0)
free, _ = torch.cuda.mem_get_info(0)
oom = max_batch_size(KnownMemoryModel(1000.0), SAMPLE, device="cuda:0")
print(json.dumps({{"budget": budget, "oom": oom, "free_gb": free / 1e9,
                  "left_gb": torch.cuda.memory_allocated(0) / 1e9}}))
'''


def test_cuda_finder_against_a_budget_and_by_catching_out_of_memory_errors() -> None:
    done = subprocess.run([sys.executable, "-c", SEARCH.format(root=str(ROOT))], env=host_env(), cwd=ROOT,
                          capture_output=True, text=True, timeout=600, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    found = json.loads(done.stdout.strip().splitlines()[-1])
    assert 98 <= found["budget"] <= 100, found  # 400 MB / 4 MB per sample, less the step's small tensors
    assert 0.8 * found["free_gb"] <= found["oom"] <= found["free_gb"], found  # 1 GB a sample, up to free memory
    assert found["left_gb"] < 1, found  # everything the search allocated was given back
