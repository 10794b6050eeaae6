"""Step time of synchronous data-parallel training on ``p`` ranks under the alpha-beta model.

A step computes for ``T_c`` seconds (forward, backward, optimizer; the no-communication twin's time) and
exchanges ``G`` bytes of gradient in ``m`` messages. The exchange costs, with latency ``alpha`` and
per-byte time ``beta``:

- ``ring``: ring all-reduce (reduce-scatter, then all-gather):
  ``T_comm = 2 (p - 1) m alpha + 2 (p - 1) / p * G beta``
- ``tree``: binomial-tree reduce to one rank, then binomial-tree broadcast, whole message per level:
  ``T_comm = 2 ceil(log2 p) (m alpha + G beta)``
- ``ps``: one parameter server whose link carries every worker's push and pull in turn:
  ``T_comm = 2 (p - 1) (m alpha + G beta)``

Without overlap the step is ``T = T_c + T_comm``. With overlap, communication runs during the backward
pass, a share ``b`` of the compute: ``T = (1 - b) T_c + max(b T_c, T_comm)``. Weak scaling (the per-rank
batch ``B`` is fixed): throughput ``p B / T``, speedup ``p T(1) / T(p)`` with ``T(1) = T_c`` (no exchange
on one rank), efficiency ``speedup / p``, communication fraction ``(T - T_c) / T`` (the exposed share).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

ALGORITHMS = ("ring", "tree", "ps")
DEFAULT_BACKWARD_SHARE = 2.0 / 3.0  # backward costs about twice the forward
DEFAULT_BUCKET_BYTES = 25 * 1024 * 1024  # DDP's default bucket: one message per 25 MiB of gradient


@dataclass(frozen=True)
class Network:
    """Latency per message (s) and time per byte (s/B) of the exchange."""

    alpha_s: float
    beta_s_per_byte: float

    def __post_init__(self) -> None:
        if not (self.alpha_s >= 0 and self.beta_s_per_byte >= 0):
            raise ValueError(f"latency and time per byte must be >= 0, got {self.alpha_s}, {self.beta_s_per_byte}")


def exchange_time(algorithm: str, p: int, grad_bytes: float, messages: int, net: Network) -> float:
    """Seconds one step spends exchanging ``grad_bytes`` in ``messages`` messages on ``p`` ranks."""
    if p < 1:
        raise ValueError(f"rank count must be >= 1, got {p}")
    a, b = net.alpha_s, net.beta_s_per_byte
    if algorithm == "ring":
        return 2 * (p - 1) * messages * a + 2 * (p - 1) / p * grad_bytes * b
    if algorithm == "tree":
        levels = math.ceil(math.log2(p)) if p > 1 else 0
        return 2 * levels * (messages * a + grad_bytes * b)
    if algorithm == "ps":
        return 2 * (p - 1) * (messages * a + grad_bytes * b)
    raise ValueError(f"unknown algorithm {algorithm!r}; known: {', '.join(ALGORITHMS)}")


def step_time(compute_s: float, comm_s: float, *, overlap: bool, backward_share: float) -> float:
    """``T_c + T_comm``, or with overlap ``(1 - b) T_c + max(b T_c, T_comm)``."""
    if not overlap:
        return compute_s + comm_s
    backward = backward_share * compute_s
    return compute_s - backward + max(backward, comm_s)


@dataclass(frozen=True)
class Workload:
    """One training step: compute time, gradient bytes and messages, per-rank batch."""

    compute_s: float
    grad_bytes: float
    messages: int
    per_rank_batch: float


@dataclass(frozen=True)
class Projection:
    """The projected figures of one workload at ``ranks`` for one algorithm and overlap mode."""

    algorithm: str
    overlap: bool
    ranks: int
    step_s: float
    comm_s: float
    throughput: float
    speedup: float
    efficiency: float
    comm_fraction: float


def project(work: Workload, net: Network, algorithm: str, p: int, *, overlap: bool,
            backward_share: float = DEFAULT_BACKWARD_SHARE) -> Projection:
    """Step time, throughput, speedup, efficiency and communication fraction at ``p`` ranks."""
    comm = exchange_time(algorithm, p, work.grad_bytes, work.messages, net)
    step = step_time(work.compute_s, comm, overlap=overlap, backward_share=backward_share)
    speedup = p * work.compute_s / step
    return Projection(
        algorithm=algorithm,
        overlap=overlap,
        ranks=p,
        step_s=step,
        comm_s=comm,
        throughput=p * work.per_rank_batch / step,
        speedup=speedup,
        efficiency=speedup / p,
        comm_fraction=(step - work.compute_s) / step,
    )


def messages_for(grad_bytes: float, bucket_bytes: float = DEFAULT_BUCKET_BYTES) -> int:
    """Messages per step when gradients go in buckets of ``bucket_bytes`` (at least one)."""
    return max(1, math.ceil(grad_bytes / bucket_bytes))
