"""Bandwidth figures: nccl-tests ``algbw``/``busbw`` and the memory-copy ceiling of this machine.

Sizes follow nccl-tests: ``nbytes`` is the collective's size S, the largest buffer involved
(all_reduce, broadcast, reduce: the tensor; all_gather: the gathered output, i.e. bytes per rank x n;
reduce_scatter: the full input, bytes per rank x n; all_to_all: the full buffer). ``algbw = S / t`` in
GB/s (1 GB = 1e9 bytes) and ``busbw = algbw x factor`` with the factor of :func:`bus_factor`.
"""

from __future__ import annotations

from collections.abc import Callable

from pytest_dmlbench.measure.clock import now

GB = 1e9

_FACTORS = {
    "all_reduce": lambda n: 2 * (n - 1) / n,
    "all_gather": lambda n: (n - 1) / n,
    "all_gather_into_tensor": lambda n: (n - 1) / n,
    "all_gather_single": lambda n: (n - 1) / n,
    "reduce_scatter": lambda n: (n - 1) / n,
    "reduce_scatter_tensor": lambda n: (n - 1) / n,
    "reduce_scatter_single": lambda n: (n - 1) / n,
    "all_to_all": lambda n: (n - 1) / n,
    "all_to_all_single": lambda n: (n - 1) / n,
    "broadcast": lambda n: 1.0,
    "reduce": lambda n: 1.0,
}

COLLECTIVES = tuple(_FACTORS)


def bus_factor(op: str, world_size: int) -> float:
    """The nccl-tests factor turning algbw into busbw for ``op`` on ``world_size`` ranks."""
    if op not in _FACTORS:
        raise ValueError(f"unknown collective {op!r}; known: {', '.join(COLLECTIVES)}")
    if world_size < 1:
        raise ValueError(f"world_size must be >= 1, got {world_size}")
    factor: Callable[[int], float] = _FACTORS[op]
    return float(factor(world_size))


def algbw_gbps(nbytes: int, seconds: float) -> float:
    """Algorithm bandwidth: size S over time per operation, in GB/s."""
    if seconds <= 0:
        raise ValueError(f"time per operation must be > 0 s, got {seconds}")
    return nbytes / seconds / GB


def busbw_gbps(op: str, nbytes: int, seconds: float, world_size: int) -> float:
    """Bus bandwidth: algbw x :func:`bus_factor`, comparable across world sizes and with the link speed."""
    return algbw_gbps(nbytes, seconds) * bus_factor(op, world_size)


def memcpy_gbps(nbytes: int = 64 * 1024 * 1024, *, iters: int = 5, rounds: int = 5) -> list[float]:
    """Memory-copy bandwidth of a ``Tensor.copy_`` of ``nbytes`` (bytes copied per second, GB/s).

    One warm-up copy, then ``rounds`` samples of ``iters`` back-to-back copies each. On one machine this is
    the ceiling for busbw between local ranks. Runs on this process only (no collective).
    """
    import torch

    if nbytes < 1 or iters < 1 or rounds < 1:
        raise ValueError(f"memcpy_gbps needs nbytes, iters, rounds >= 1, got {nbytes}, {iters}, {rounds}")
    src = torch.ones(nbytes, dtype=torch.uint8)
    dst = torch.empty_like(src)
    dst.copy_(src)
    samples = []
    for _ in range(rounds):
        start = now()
        for _ in range(iters):
            dst.copy_(src)
        elapsed = now() - start
        samples.append(nbytes * iters / elapsed / GB)
    return samples
