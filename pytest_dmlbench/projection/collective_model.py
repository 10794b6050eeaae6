"""The alpha-beta cost of one collective, as gloo runs it on CPU, and the fit of alpha and beta to timings.

A collective of size S bytes (nccl-tests sizes, :mod:`pytest_dmlbench.measure.bandwidth`) on ``p`` ranks
costs ``T = L(op, p) * alpha + W(op, p) * S * beta``: ``alpha`` is the latency of one message (seconds),
``beta`` the time per byte on one link (seconds per byte, ``1 / bandwidth``), ``L`` the number of
sequential message steps and ``W`` the share of S that crosses one link in sequence:

=================  ================  =====================
collective         L(op, p)          W(op, p)
=================  ================  =====================
all_reduce (ring)  2 (p - 1)         2 (p - 1) / p
all_gather (ring)  p - 1             (p - 1) / p
reduce_scatter     p - 1             (p - 1) / p
all_to_all         p - 1             (p - 1) / p
broadcast, reduce  ceil(log2 p)      ceil(log2 p)  (binomial tree, whole message per level)
=================  ================  =====================

At ``p = 1`` every coefficient is 0: a one-rank collective carries no information about the network.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

RING_OPS = ("all_gather", "reduce_scatter", "all_to_all")
TREE_OPS = ("broadcast", "reduce")
MODELLED_OPS = ("all_reduce", *RING_OPS, *TREE_OPS)


def coefficients(op: str, p: int) -> tuple[float, float]:
    """``(L, W)`` of ``op`` on ``p`` ranks (see the module docstring)."""
    if p < 1:
        raise ValueError(f"world size must be >= 1, got {p}")
    if op == "all_reduce":
        return 2.0 * (p - 1), 2.0 * (p - 1) / p
    if op in RING_OPS:
        return float(p - 1), (p - 1) / p
    if op in TREE_OPS:
        levels = float(math.ceil(math.log2(p))) if p > 1 else 0.0
        return levels, levels
    raise ValueError(f"no cost model for collective {op!r}; modelled: {', '.join(MODELLED_OPS)}")


@dataclass(frozen=True)
class Timing:
    """One measured point: ``op`` of ``nbytes`` on ``world_size`` ranks took ``seconds`` (a median)."""

    op: str
    world_size: int
    nbytes: float
    seconds: float


@dataclass(frozen=True)
class AlphaBeta:
    """A fitted (or given) latency ``alpha_s`` and per-byte time ``beta_s_per_byte`` of one collective."""

    op: str
    alpha_s: float
    beta_s_per_byte: float
    points: int
    world_sizes: tuple[int, ...]
    max_rel_residual: float

    @property
    def bandwidth_gbps(self) -> float:
        return 1.0 / self.beta_s_per_byte / 1e9 if self.beta_s_per_byte > 0 else math.inf

    def predict(self, nbytes: float, p: int) -> float:
        latency, width = coefficients(self.op, p)
        return latency * self.alpha_s + width * nbytes * self.beta_s_per_byte


class FitError(ValueError):
    """The timings cannot determine alpha and beta (too few or degenerate points); says what is missing."""


def fit(op: str, timings: list[Timing]) -> AlphaBeta:
    """Least-squares ``alpha`` and ``beta`` of ``op`` from its timings over message sizes (and world sizes).

    Each row ``L * alpha + W * S * beta = T`` is divided by ``T``, so the fit minimises relative residuals:
    small messages (which carry the latency) weigh as much as large ones (which carry the bandwidth).
    Points at world size 1 are left out (they carry no network cost). Exact timings give back the alpha
    and beta they were made from.
    """
    rows = [t for t in timings if t.op == op and t.world_size > 1 and t.seconds > 0 and t.nbytes > 0]
    if len({(t.world_size, t.nbytes) for t in rows}) < 2:
        raise FitError(
            f"{op}: need timings at two or more message sizes on more than one rank to fit latency and "
            f"bandwidth, got {len(rows)} usable point(s)"
        )
    design = np.array([[coefficients(op, t.world_size)[0], coefficients(op, t.world_size)[1] * t.nbytes]
                       for t in rows])
    times = np.array([t.seconds for t in rows])
    weighted = design / times[:, None]
    solution, _, rank, _ = np.linalg.lstsq(weighted, np.ones(len(rows)), rcond=None)
    if rank < 2:
        raise FitError(f"{op}: the timings do not separate latency from bandwidth (degenerate design)")
    alpha, beta = float(solution[0]), float(solution[1])
    residual = np.abs(design @ solution - times) / times
    return AlphaBeta(op, alpha, beta, len(rows), tuple(sorted({t.world_size for t in rows})),
                     float(residual.max()))
