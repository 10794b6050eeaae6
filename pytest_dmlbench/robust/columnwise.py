"""Column-chunked evaluation of per-coordinate rules on a thread pool, and a fast column sort.

PyTorch's CPU sort and selection kernels along dim 0 of an ``(n, d)`` tensor run on one thread and are
several times slower than numpy's SIMD sort (measured by ``studies/bench_aggregators.py``). Rules therefore
sort cache-sized column chunks with numpy (which releases the GIL) on ``torch.get_num_threads()``
threads. Each chunk is independent, so the result does not depend on the number of threads.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import torch
from torch import Tensor

CHUNK_COLUMNS = 4096
_pools: dict[tuple[int, int], ThreadPoolExecutor] = {}


def _pool(workers: int) -> ThreadPoolExecutor:
    # Keyed by pid: a forked rank process must not reuse its parent's (thread-less) pool.
    key = (os.getpid(), workers)
    if key not in _pools:
        _pools[key] = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="dmlbench-robust")
    return _pools[key]


def sort_columns(block: Tensor) -> Tensor:
    """Values of each column of ``block`` in ascending order (-inf first, NaN last, as ``torch.sort``).

    On CPU the block is transposed into a private contiguous copy whose rows numpy sorts in place (one
    short contiguous sort per column, about 2.5x less CPU than sorting along the strided axis); the
    result is returned as an ``(n, c)`` view of that copy.
    """
    if block.device.type == "cpu" and block.dtype in (torch.float32, torch.float64):
        rows = np.ascontiguousarray(block.detach().numpy().T)
        rows.sort(axis=1)
        return torch.from_numpy(rows).T
    return torch.sort(block, dim=0).values


def map_columns(x: Tensor, fn: Callable[[Tensor], Tensor], chunk: int = CHUNK_COLUMNS) -> Tensor:
    """Apply ``fn`` (an ``(n, c) -> (c,)`` per-coordinate rule) to column chunks of ``x``; return ``(d,)``."""
    d = x.shape[1]
    out = torch.empty(d, dtype=x.dtype, device=x.device)
    starts = range(0, d, chunk)

    def work(start: int) -> None:
        out[start : start + chunk] = fn(x[:, start : start + chunk])

    workers = torch.get_num_threads()
    if workers <= 1 or len(starts) <= 1 or x.device.type != "cpu":
        for start in starts:
            work(start)
    else:
        for future in [_pool(workers).submit(work, start) for start in starts]:
            future.result()
    return out
