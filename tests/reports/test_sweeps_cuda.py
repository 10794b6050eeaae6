"""The max-batch-size finder on a real GPU (skipped without one): the known-memory model against a CUDA
memory budget, and against the device's whole memory through real out-of-memory errors."""

from __future__ import annotations

import pytest
import torch

from pytest_dmlbench.sweeps import max_batch_size
from tests.conftest import GPU_SKIP
from tests.reports.test_sweeps import SAMPLE, KnownMemoryModel

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason=GPU_SKIP)


def test_cuda_finder_against_a_memory_budget() -> None:
    found = max_batch_size(KnownMemoryModel(4.0), SAMPLE, device="cuda:0", memory_mb=400.0)
    assert 98 <= found <= 100, found  # 400 MB / 4 MB per sample, less the step's small tensors


def test_cuda_finder_by_catching_out_of_memory_errors() -> None:
    free, _ = torch.cuda.mem_get_info(0)
    per_sample_gb = 1.0
    found = max_batch_size(KnownMemoryModel(per_sample_gb * 1000), SAMPLE, device="cuda:0")
    expected = free / 1e9 / per_sample_gb
    assert 0.8 * expected <= found <= expected, (found, expected)
    assert torch.cuda.memory_allocated(0) < 1e9  # everything the search allocated was given back
