"""Collective bandwidth in the manner of nccl-tests: time per operation, algbw and busbw, over message
sizes from 4 KB to 64 MB, beside the machine's memory-copy bandwidth measured in the same run (the
physical ceiling of any collective on one machine)."""

from __future__ import annotations

from typing import Any

import pytest

from pytest_dmlbench.measure.bandwidth import memcpy_gbps

SIZES = {"4KB": 4 << 10, "64KB": 64 << 10, "1MB": 1 << 20, "16MB": 16 << 20, "64MB": 64 << 20}
OPS = ["all_reduce", "all_gather", "reduce_scatter", "broadcast"]
BYTES_PER_ROUND = 128 << 20  # big messages need few back-to-back calls to time well


def iterations_for(nbytes: int) -> int:
    return max(2, min(20, BYTES_PER_ROUND // nbytes))


@pytest.mark.dmlbench(timeout=300)
@pytest.mark.dmlbench_smoke("size")
@pytest.mark.parametrize("size", list(SIZES), ids=list(SIZES))
@pytest.mark.parametrize("op", OPS, ids=OPS)
def test_collective_bandwidth(dist: Any, dmlbench: Any, op: str, size: str) -> None:
    nbytes = SIZES[size]
    # 10 rounds: two blocks of 5, the fewest a stored-baseline test can judge
    result = dmlbench.collective(op, nbytes, iters=iterations_for(nbytes), warmup=2, rounds=10)
    assert result.nbytes > 0


@pytest.mark.dmlbench(world_size=1)
def test_memcpy_ceiling(dist: Any, dmlbench: Any) -> None:
    """The memory-copy bandwidth of a 64 MB ``Tensor.copy_``, the ceiling busbw is read against."""
    dmlbench.record("memcpy_gbps", memcpy_gbps(64 << 20, iters=5, rounds=7))
