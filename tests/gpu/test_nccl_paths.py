"""The NCCL and CUDA paths on a real GPU (collected on every host, skipped with the reason without one):
backend choice, ``cuda:<rank>``, CUDA peak memory, strategies on CUDA tensors, gloo with CUDA tensors, and the
refusal to fork after CUDA was initialised in the pytest process. Each runs pytest in a subprocess, as a user
would, given the host's GPUs (the suite hides them from itself). NCCL between 2+ ranks:
tests/gpu/test_gpu_paths_script.py."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tests.gpu_host import host_devices, host_env, needs_gpus

pytestmark = needs_gpus(1)

CASES = '''
import pytest, torch, torch.distributed as td
import torch.nn.functional as F
from pytest_dmlbench import strategies
from pytest_dmlbench.training import models
from pytest_dmlbench.data import shard, synthetic_classification

@pytest.mark.dmlbench(world_size=1)
def test_nccl_rank_uses_its_gpu(dist, dmlbench):
    assert dist.backend == "nccl" and dist.device == "cuda:0", (dist.backend, dist.device)
    assert torch.cuda.current_device() == 0
    x = torch.ones(1 << 20, device=dist.device)
    dmlbench(td.all_reduce, x)
    assert x.is_cuda and float(x[0]) == 1.0

@pytest.mark.dmlbench(world_size=1)
@pytest.mark.parametrize("name", ["ddp", "allreduce", "bucketed", "fp16", "local_sgd"])
def test_strategy_trains_on_cuda(dist, dmlbench, name):
    strategy = strategies.build(name, models.tiny_mlp(16, 32, 10, seed=0), lr=0.1)
    assert next(strategy.model.parameters()).is_cuda
    x, y = synthetic_classification(64, (16,), 10, seed=0)
    first = strategy.step(x, y, F.cross_entropy)
    for _ in range(20):
        last = strategy.step(x, y, F.cross_entropy)
    assert last < first, (first, last)
    dmlbench.train(strategy, [(x, y)], global_batch_size=64, loss_fn=F.cross_entropy, rounds=5)

@pytest.mark.dmlbench(world_size=2, backend="gloo")
def test_gloo_with_cuda_tensors(dist):
    assert dist.backend == "gloo"
    x = torch.full((4,), float(dist.rank + 1), device="cuda:0")
    td.all_reduce(x)
    assert x.is_cuda and torch.all(x == 3.0)
'''

EARLY_CUDA = '''
import pytest, torch
torch.zeros(1, device="cuda")  # initialises CUDA in the pytest process at import time

@pytest.mark.dmlbench(world_size=1)
def test_any(dist):
    pass
'''


def run_pytest(folder: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in host_env().items() if not k.startswith(("PYTEST_", "RANK", "WORLD_SIZE", "MASTER_"))}
    return subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--dmlbench", *args],
                          cwd=folder, capture_output=True, text=True, timeout=600, env=env)


def test_nccl_and_cuda_paths(tmp_path: Path) -> None:
    (tmp_path / "test_gpu_cases.py").write_text(CASES)
    out = tmp_path / "results.json"
    proc = run_pytest(tmp_path, "-q", "-rs", "--dmlbench-json", str(out), "test_gpu_cases.py")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    results = json.loads(out.read_text())
    nccl = [c for c in results["cases"] if "nccl_rank_uses_its_gpu" in c["nodeid"]]
    assert nccl and nccl[0]["backend"] == "nccl"
    peak = nccl[0]["metrics"]["peak_cuda_mb"]["samples"][0]
    assert peak >= 4.0, peak  # the 4 MB tensor the case allocated on the GPU


def test_nccl_without_enough_gpus_is_a_skip(tmp_path: Path) -> None:
    too_many = host_devices() + 1
    (tmp_path / "test_many.py").write_text(
        f"import pytest\n@pytest.mark.dmlbench(world_size={too_many}, backend='nccl')\ndef test_x(dist):\n    pass\n")
    proc = run_pytest(tmp_path, "-q", "-rs", "test_many.py")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "nccl needs one CUDA device per rank" in proc.stdout


def test_cuda_initialised_before_the_fork_is_refused_with_the_reason(tmp_path: Path) -> None:
    (tmp_path / "test_early.py").write_text(EARLY_CUDA)
    proc = run_pytest(tmp_path, "-q", "test_early.py")
    assert proc.returncode != 0
    assert "CUDA was initialised in the pytest process before the rank processes were forked" in proc.stdout
