"""Property-based distributed cases: Hypothesis ``@given`` on real process groups, shrinking in lockstep.

Robust aggregation (properties 2, 3, 8, 9 and 12 of the reference list): every rank draws the same example
stack; rank r contributes its rows and the whole stack is all-gathered on the real group before the rule
runs, and every rank's result must be bit-identical. ``mean`` is the negative control: the same properties
must be refuted and shrunk to a small counterexample (:func:`pytest_dmlbench.properties.refute`).

Gradient equivalence over generated shapes: layer widths, global batch sizes divisible or not by the
data-parallel world size, float32/float64; ``ddp``, ``allreduce``, ``bucketed`` and ``ps`` against
single-process SGD on the whole batch (a batch that does not split into equal shards must be refused on
every rank with the message naming the fix). Negative control: a strategy that sums instead of averaging.

Cost: examples per second in lockstep beside the same property run plainly, and the per-example agreement
(a measurement, not a check: not marked ``correctness``).
"""

from __future__ import annotations

import copy
import itertools
import time
from dataclasses import dataclass
from typing import Any

import numpy as np
import pytest
import torch
import torch.distributed as td
import torch.nn.functional as F
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from torch import nn

from pytest_dmlbench.data import shard_bounds
from pytest_dmlbench.errors import ConfigError
from pytest_dmlbench.measure.rounds import smoke_or
from pytest_dmlbench.properties import refute
from pytest_dmlbench.robust import aggregate
from pytest_dmlbench.strategies import build
from pytest_dmlbench.strategies.allreduce import AllReduceStrategy
from pytest_dmlbench.training.reference import assert_identical_across_ranks, check_matches_reference, tolerances

# Every case but the cost is in the correctness suite CI runs (pytest --dmlbench --world-size 2 -m correctness):
# the cost checks nothing, it measures, so it runs with the benchmarks (pytest --dmlbench), not there.
CORRECTNESS = pytest.mark.correctness

PROPERTY = settings(max_examples=25, database=None, suppress_health_check=[HealthCheck.too_slow])
VALUES = st.floats(-100.0, 100.0, allow_nan=False, allow_infinity=False, width=64)


# ------------------------------------------------------------------------------------------ examples
@dataclass(frozen=True)
class Stack:
    """An ``(n, d)`` stack of updates whose last ``f`` rows are Byzantine; ``n`` divides by the world size."""

    x: np.ndarray
    f: int

    @property
    def honest(self) -> np.ndarray:
        return self.x[: len(self.x) - self.f]


def max_f(rule: str, n: int) -> int:
    """The largest f the rule's precondition allows for n inputs (reference list)."""
    limits = {"median": (n - 1) // 2, "meamed": (n - 1) // 2, "trimmed_mean": (n - 1) // 2,
              "krum": (n - 3) // 2, "multi_krum": (n - 3) // 2, "bulyan": (n - 3) // 4, "mean": n - 1}
    return max(0, limits[rule])


@st.composite
def stacks(draw: Any, rule: str, world_size: int, *, identical_honest: bool = False, min_f: int = 0) -> Stack:
    """1-3 rows per rank, 1-4 coordinates, f Byzantine rows (arbitrary bounded values) at the end."""
    per_rank = draw(st.integers(1, 3))
    n = per_rank * world_size
    if rule in ("krum", "multi_krum", "bulyan"):  # these need n >= 3 even with f = 0
        n = max(per_rank, -(-3 // world_size)) * world_size
    f = draw(st.integers(min(min_f, max_f(rule, n)), max_f(rule, n)))
    d = draw(st.integers(1, 4))
    row = st.lists(VALUES, min_size=d, max_size=d)
    honest = [draw(row)] * (n - f) if identical_honest else draw(st.lists(row, min_size=n - f, max_size=n - f))
    byzantine = draw(st.lists(row, min_size=f, max_size=f))
    return Stack(np.array(honest + byzantine, dtype=np.float64).reshape(n, d), f)


def all_gathered(stack: Stack, dist: Any) -> torch.Tensor:
    """Rank r contributes rows ``[r k, (r+1) k)`` of the shared example; returns the all-gathered stack."""
    rows = torch.from_numpy(stack.x)
    k = rows.shape[0] // dist.world_size
    mine = rows[dist.rank * k:(dist.rank + 1) * k].contiguous()
    parts = [torch.empty_like(mine) for _ in range(dist.world_size)]
    td.all_gather(parts, mine)
    gathered = torch.cat(parts)
    assert torch.equal(gathered, rows), "the all-gathered stack differs from the shared example"
    return gathered


def aggregated(rule: str, stack: Stack, dist: Any) -> torch.Tensor:
    """The rule on the all-gathered stack; bit-identical on every rank (property 12)."""
    out = aggregate(rule, all_gathered(stack, dist), f=stack.f)
    assert_identical_across_ranks(out, what=f"{rule} output")
    return out


def scale(stack: Stack) -> float:
    return max(1.0, float(np.abs(stack.x).max()))


# ------------------------------------------------------------------------------------------ properties
def check_bounds(rule: str, stack: Stack, dist: Any) -> None:
    """9. median and trimmed_mean lie, per coordinate, between the honest rows' min and max."""
    out = aggregated(rule, stack, dist).numpy()
    tol = 1e-12 * scale(stack)
    low, high = stack.honest.min(axis=0), stack.honest.max(axis=0)
    assert np.all(out >= low - tol) and np.all(out <= high + tol), (
        f"{rule} output {out} outside the honest bounds [{low}, {high}] with f={stack.f}")


def check_breakdown(rule: str, stack: Stack, dist: Any) -> None:
    """8. If every honest row is c, any f Byzantine rows leave the output at c."""
    out = aggregated(rule, stack, dist).numpy()
    c = stack.honest[0]
    assert np.allclose(out, c, rtol=0.0, atol=1e-9 * scale(stack)), (
        f"{rule} moved from the honest value {c} to {out} under f={stack.f} Byzantine row(s)")


def check_translation_and_permutation(rule: str, stack: Stack, shift: float, seed: int, dist: Any) -> None:
    """3. F(x + c) = F(x) + c, and 2. F is invariant to the order of its inputs (coordinate-wise rules)."""
    out = aggregated(rule, stack, dist).numpy()
    shifted = aggregated(rule, Stack(stack.x + shift, stack.f), dist).numpy()
    tol = 1e-9 * (scale(stack) + abs(shift))
    assert np.allclose(shifted, out + shift, rtol=0.0, atol=tol), f"{rule}: F(x+{shift}) != F(x)+{shift}"
    order = np.random.default_rng(seed).permutation(len(stack.x))
    permuted = aggregate(rule, torch.from_numpy(stack.x[order]), f=stack.f).numpy()
    assert np.allclose(permuted, out, rtol=0.0, atol=1e-12 * scale(stack)), f"{rule}: not permutation invariant"


@CORRECTNESS
@pytest.mark.dmlbench
@pytest.mark.parametrize("rule", ["median", "trimmed_mean"])
@PROPERTY
@given(data=st.data())
def test_output_within_honest_bounds(dist: Any, rule: str, data: st.DataObject) -> None:
    check_bounds(rule, data.draw(stacks(rule, dist.world_size)), dist)


@CORRECTNESS
@pytest.mark.dmlbench
@pytest.mark.parametrize("rule", ["median", "trimmed_mean", "meamed", "krum", "multi_krum", "bulyan"])
@PROPERTY
@given(data=st.data())
def test_identical_honest_rows_survive_f_byzantine_rows(dist: Any, rule: str, data: st.DataObject) -> None:
    check_breakdown(rule, data.draw(stacks(rule, dist.world_size, identical_honest=True)), dist)


@CORRECTNESS
@pytest.mark.dmlbench
@pytest.mark.parametrize("rule", ["mean", "median", "trimmed_mean", "meamed"])
@PROPERTY
@given(data=st.data(), shift=VALUES, seed=st.integers(0, 2**32 - 1))
def test_translation_equivariant_and_permutation_invariant(dist: Any, rule: str, data: st.DataObject,
                                                           shift: float, seed: int) -> None:
    check_translation_and_permutation(rule, data.draw(stacks(rule, dist.world_size)), shift, seed, dist)


def _refuted(check: Any, dist: Any, **draw: Any) -> Any:
    @settings(max_examples=200, database=None)
    @given(data=st.data())
    def prop(data: st.DataObject) -> None:
        stack = data.draw(stacks("mean", dist.world_size, **draw))
        prop.last = stack  # type: ignore[attr-defined]
        check("mean", stack, dist)

    counterexample = refute(prop)
    return counterexample, prop.last  # type: ignore[attr-defined]


@CORRECTNESS
@pytest.mark.dmlbench
def test_negative_control_mean_breaks_down_and_shrinks(dist: Any) -> None:
    """Property 8 refuted for ``mean`` (every rank agrees), shrunk to one Byzantine row, one coordinate."""
    counterexample, stack = _refuted(check_breakdown, dist, identical_honest=True, min_f=1)
    assert counterexample.failed_ranks == list(range(dist.world_size))
    assert stack.f == 1 and stack.x.shape[1] == 1, f"not shrunk: f={stack.f}, shape {stack.x.shape}"
    assert stack.x.shape[0] == dist.world_size, f"not shrunk to one row per rank: {stack.x}"


@CORRECTNESS
@pytest.mark.dmlbench
def test_negative_control_mean_leaves_honest_bounds_and_shrinks(dist: Any) -> None:
    """Property 9 refuted for ``mean``, shrunk to one row per rank and one coordinate."""
    counterexample, stack = _refuted(check_bounds, dist, min_f=1)
    assert counterexample.failed_ranks == list(range(dist.world_size))
    assert stack.x.shape == (dist.world_size, 1) and stack.f == 1, f"not shrunk: {stack}"


# --------------------------------------------------------------------------------- gradient equivalence
class SumStrategy(AllReduceStrategy):
    """Broken on purpose: sums gradients over ranks without dividing by the world size."""

    def _average_gradients(self) -> None:
        for param in self.model.parameters():
            assert param.grad is not None
            td.all_reduce(param.grad)


def perceptron(widths: list[int], dtype: torch.dtype) -> nn.Sequential:
    layers: list[nn.Module] = []
    for i, (a, b) in enumerate(itertools.pairwise(widths)):
        layers.append(nn.Linear(a, b))
        if i < len(widths) - 2:
            layers.append(nn.Tanh())
    return nn.Sequential(*layers).to(dtype)


@dataclass(frozen=True)
class Shape:
    widths: list[int]
    batch: int
    dtype: torch.dtype


SHAPES = st.builds(
    Shape,
    widths=st.lists(st.integers(1, 6), min_size=2, max_size=4),
    batch=st.integers(1, 12),
    dtype=st.sampled_from([torch.float32, torch.float64]),
)


def check_equivalence(make: Any, shape: Shape) -> None:
    """Two SGD steps of the strategy equal single-process SGD on the whole batch (ranks bit-identical);
    a batch that does not split into equal shards is refused on every rank, naming the fix."""
    torch.manual_seed(0)  # the same model on every rank
    model = perceptron(shape.widths, shape.dtype)
    reference = copy.deepcopy(model)
    strategy = make(model)
    inputs = torch.randn(2, shape.batch, shape.widths[0], dtype=shape.dtype)
    targets = torch.randn(2, shape.batch, shape.widths[-1], dtype=shape.dtype)
    batches = [(inputs[s], targets[s]) for s in range(2)]
    rtol, atol = tolerances(shape.dtype)
    if shape.batch % strategy.data_world_size:  # checked on every rank (a ps server holds no shard)
        with pytest.raises(ConfigError, match=f"multiple of {strategy.data_world_size}"):
            shard_bounds(shape.batch, 0, strategy.data_world_size)
        return
    check_matches_reference(strategy, reference, batches, F.mse_loss, rtol=rtol, atol=atol)


@CORRECTNESS
@pytest.mark.dmlbench
@pytest.mark.parametrize("name", ["ddp", "allreduce", "bucketed", "ps"])
@settings(max_examples=10, database=None, suppress_health_check=[HealthCheck.too_slow])
@given(shape=SHAPES)
def test_gradient_equivalence_over_generated_shapes(dist: Any, name: str, shape: Shape) -> None:
    check_equivalence(lambda model: build(name, model, lr=0.1), shape)


@CORRECTNESS
@pytest.mark.dmlbench(world_size=2)
def test_negative_control_summing_strategy_is_refuted(dist: Any) -> None:
    @settings(max_examples=50, database=None)
    @given(shape=SHAPES)
    def prop(shape: Shape) -> None:
        check_equivalence(lambda model: SumStrategy(model, lr=0.1), shape)

    counterexample = refute(prop)
    shape = counterexample.example["shape"]
    assert shape.batch % 2 == 0 and len(shape.widths) == 2, f"not shrunk: {shape}"


# ------------------------------------------------------------------------------------------------- cost
COST_EXAMPLES = 200


def _median_property(examples: int) -> Any:
    @settings(max_examples=examples, database=None, deadline=None)
    @given(x=st.lists(VALUES, min_size=8, max_size=8))
    def prop(x: list[float]) -> None:
        out = aggregate("median", torch.tensor(x, dtype=torch.float64).reshape(4, 2), f=1)
        assert out.shape == (2,)

    return prop


@pytest.mark.dmlbench(scaling=True)
def test_lockstep_cost(dist: Any, dmlbench: Any) -> None:
    """Examples per second of one property in lockstep and run plainly on each rank (no agreement), and
    the agreement alone (one exchange per example) in microseconds."""
    from pytest_dmlbench.properties.channel import current_channel
    from pytest_dmlbench.properties.lockstep import PASS, run_in_lockstep

    examples, exchanges = smoke_or(dmlbench.block, COST_EXAMPLES), smoke_or(dmlbench.block, 500)
    prop = _median_property(examples)
    channel = current_channel()
    rates, plain_rates, agreement_us = [], [], []
    for _ in range(smoke_or(dmlbench.block, 5)):
        td.barrier()
        start = time.perf_counter()
        run_in_lockstep(prop, {})
        rates.append(examples / (time.perf_counter() - start))
        td.barrier()
        start = time.perf_counter()
        prop()
        plain_rates.append(examples / (time.perf_counter() - start))
        td.barrier()
        start = time.perf_counter()
        for _ in range(exchanges):
            channel.exchange(PASS)
        agreement_us.append((time.perf_counter() - start) / exchanges * 1e6)
    # rank 0's figures are kept; the agreement is the same exchange on every rank
    dmlbench.record("lockstep_examples_per_s", rates, unit="1/s", better="higher")
    dmlbench.record("plain_examples_per_s", plain_rates, unit="1/s", better="higher")
    dmlbench.record("agreement_us", agreement_us, unit="us", better="lower")
