"""Single-process reference training and the checks that compare distributed strategies with it.

Runs on ranks (no pytest import). The checks raise ``AssertionError`` with the measured discrepancy, so
the same functions serve the correctness cases and their negative controls.

Tolerances (:func:`tolerances`): float64 ``rtol=1e-10, atol=1e-12``; float32 ``rtol=1e-4, atol=1e-6``.
A data-parallel step sums the same per-sample gradients in a different order than the single-process
reference (per shard, then across ranks), which moves each result by a few units in the last place per
step. Measured on the small CNN, 3 momentum steps, 4 ranks: the float32 deviations use about 1 % of the
budget; a missing synchronisation or a wrong averaging factor exceeds it by orders of magnitude.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable, Iterator, Sequence

import torch
import torch.distributed as dist
from torch import nn

from pytest_dmlbench.data.sharding import shard
from pytest_dmlbench.measure.collective_bench import torch_collective
from pytest_dmlbench.strategies.base import LossFn, Strategy, resolve_device

Batch = tuple[torch.Tensor, torch.Tensor]


def tolerances(dtype: torch.dtype) -> tuple[float, float]:
    """``(rtol, atol)`` for comparing a strategy's parameters with the reference in ``dtype``."""
    if dtype == torch.float64:
        return 1e-10, 1e-12
    if dtype == torch.float32:
        return 1e-4, 1e-6
    raise ValueError(f"no reference tolerance for {dtype}; use float32 or float64 models")


def flat(tensors: Iterable[torch.Tensor]) -> torch.Tensor:
    """All tensors, detached, flattened and concatenated (on the CPU)."""
    parts = [t.detach().reshape(-1).cpu() for t in tensors]
    return torch.cat(parts) if parts else torch.zeros(0)


def flat_grads(params: Iterable[torch.Tensor]) -> torch.Tensor:
    """The gradients of ``params``, flattened (a missing gradient reads as zeros)."""
    return flat(p.grad if p.grad is not None else torch.zeros_like(p) for p in params)


def reference_sgd(
    model: nn.Module, batches: Iterable[Batch], loss_fn: LossFn, *, lr: float, momentum: float = 0.0
) -> Iterator[float]:
    """Train ``model`` in place with ``torch.optim.SGD``, one step per global batch; yields each loss.

    After each ``yield`` the model holds that step's parameters and gradients.
    """
    optimizer = torch.optim.SGD(model.parameters(), lr=lr, momentum=momentum)
    for inputs, targets in batches:
        optimizer.zero_grad(set_to_none=True)
        loss = loss_fn(model(inputs), targets)
        loss.backward()  # type: ignore[no-untyped-call]
        optimizer.step()
        yield float(loss.detach())


def assert_close(actual: torch.Tensor, expected: torch.Tensor, *, rtol: float, atol: float, what: str) -> None:
    """``|actual - expected| <= atol + rtol |expected|`` everywhere; else AssertionError naming the worst.

    A NaN in ``actual`` or in ``expected`` is a difference: a reference that diverged fails the check.
    """
    if actual.shape != expected.shape:
        raise AssertionError(f"{what}: shape {tuple(actual.shape)} != expected {tuple(expected.shape)}")
    excess = (actual - expected).abs() - (atol + rtol * expected.abs())
    bad = (excess > 0) | torch.isnan(excess)  # NaN on either side (a diverged reference too) never passes
    if bool(bad.any()):
        worst = int(torch.nan_to_num(excess, nan=float("inf")).flatten().argmax())
        flat_actual, flat_expected = actual.flatten(), expected.flatten()
        raise AssertionError(
            f"{what}: {int(bad.sum())} of {excess.numel()} values differ beyond rtol={rtol}, "
            f"atol={atol}; worst at index {worst}: {flat_actual[worst].item()!r} vs {flat_expected[worst].item()!r}"
        )


def raise_on_all_ranks(error: str | None, *, what: str) -> None:
    """Rank-agreed verdict (collective): if any rank reports an error, every rank raises AssertionError.

    Keeps a check that fails on some ranks only from leaving the others waiting in the next collective.
    """
    # One all-reduce of a flag per rank, not an all-gather of one tensor per rank: at 1024 simulated ranks that
    # was a million tensors per verdict (14 s each, against 0.3 s).
    flags = torch.zeros(dist.get_world_size(), dtype=torch.int64, device=resolve_device(None))  # nccl: CUDA only
    flags[dist.get_rank()] = int(error is not None)
    dist.all_reduce(flags)
    failed = [int(rank) for rank in flags.nonzero().flatten()]
    if failed:
        detail = error or f"{what}: this rank agreed; see the failing ranks' messages"
        raise AssertionError(f"failed on rank(s) {failed}: {detail}")


def assert_close_on_all_ranks(
    actual: torch.Tensor, expected: torch.Tensor, *, rtol: float, atol: float, what: str
) -> None:
    """:func:`assert_close` on every rank, with a rank-agreed verdict (collective)."""
    error = None
    try:
        assert_close(actual, expected, rtol=rtol, atol=atol, what=what)
    except AssertionError as exc:
        error = str(exc)
    raise_on_all_ranks(error, what=what)


def digest(tensor: torch.Tensor) -> torch.Tensor:
    """SHA-256 of the tensor's bytes as 32 uint8 values (equal digests: bit-identical tensors)."""
    data = tensor.detach().cpu().contiguous().reshape(-1).view(torch.uint8).numpy().tobytes()
    return torch.frombuffer(bytearray(hashlib.sha256(data).digest()), dtype=torch.uint8)


def disagreeing_ranks(tensor: torch.Tensor, *, key: int = 0) -> list[tuple[int, int]]:
    """Pairs ``(rank, first rank with its key)`` whose ``tensor`` bits differ (collective: call on all ranks).

    Gathers a SHA-256 digest and the key from every rank, so every rank gets the same answer.
    """
    # One all-gather into one (world, 33) tensor and a vectorised comparison, not a list of world_size tensors
    # compared row by row: at 1024 simulated ranks (threads of one process) that was a million torch calls a check.
    device = resolve_device(None)  # nccl: CUDA only
    mine = torch.cat([digest(tensor).to(torch.int64), torch.tensor([key], dtype=torch.int64)]).to(device)
    gathered = torch.empty((dist.get_world_size(), mine.numel()), dtype=torch.int64, device=device)
    # gloo wants the input shaped as one row of the output
    torch_collective("all_gather")(gathered, mine.reshape(1, -1))
    rows = gathered.cpu()
    digests, keys = rows[:, :-1], rows[:, -1]
    _, key_index = torch.unique(keys, return_inverse=True)
    ranks = torch.arange(len(keys))
    first_of_key = torch.full((int(key_index.max()) + 1,), len(keys), dtype=torch.int64)
    first_of_key.scatter_reduce_(0, key_index, ranks, reduce="amin")
    reference = first_of_key[key_index]
    differs = (digests != digests[reference]).any(dim=1)
    return [(int(rank), int(reference[rank])) for rank in differs.nonzero().flatten()]


def assert_identical_across_ranks(tensor: torch.Tensor, *, what: str, key: int = 0) -> None:
    """Every rank with the same ``key`` holds a bit-identical ``tensor`` (collective: call on all ranks)."""
    mismatched = disagreeing_ranks(tensor, key=key)
    if mismatched:
        pairs = ", ".join(f"rank {r} != rank {ref}" for r, ref in mismatched)
        raise AssertionError(f"{what} not bit-identical across ranks: {pairs}")


def batch_for(strategy: Strategy, batch: Batch) -> tuple[torch.Tensor | None, torch.Tensor | None]:
    """This rank's shard of a global batch, following ``strategy.data_rank`` / ``data_world_size``."""
    if strategy.data_rank is None:
        return None, None
    inputs, targets = shard(batch, strategy.data_rank, strategy.data_world_size)
    return inputs, targets


def check_matches_reference(
    strategy: Strategy,
    reference_model: nn.Module,
    batches: Sequence[Batch],
    loss_fn: LossFn,
    *,
    rtol: float,
    atol: float,
    check_after: Callable[[int], bool] = lambda step: True,
) -> list[float]:
    """Train ``strategy`` and the single-process reference side by side; check after every step.

    ``reference_model`` is a copy of the strategy's initial model (same parameters), trained on the whole
    global batch with the strategy's ``lr`` and ``momentum``. After every step: the ranks' parameters are
    bit-identical and equal the reference's within ``rtol``/``atol`` (after the steps where
    ``check_after(step)``; e.g. only synchronising steps of ``local_sgd``).
    Returns this rank's losses.
    """
    reference = reference_sgd(reference_model, batches, loss_fn, lr=strategy.lr, momentum=strategy.momentum)
    losses = []
    for step, batch in enumerate(batches, start=1):
        inputs, targets = batch_for(strategy, batch)
        losses.append(strategy.step(inputs, targets, loss_fn))
        next(reference)
        if not check_after(step):
            continue
        params = flat(strategy.model.parameters())
        assert_identical_across_ranks(params, what=f"{strategy.name} parameters after step {step}")
        assert_close_on_all_ranks(
            params,
            flat(reference_model.parameters()),
            rtol=rtol,
            atol=atol,
            what=f"{strategy.name} parameters vs single-process reference after step {step}",
        )
    return losses


def relative_error(actual: torch.Tensor, exact: torch.Tensor) -> float:
    """``||actual - exact|| / ||exact||`` (L2)."""
    return float((actual - exact).norm() / exact.norm())
