"""The largest batch that completes one training step: doubling, then bisecting.

On CUDA a batch fits when its step raises no out-of-memory error (and, with ``memory_mb``, its
``max_memory_allocated`` stays within the budget). On CPU nothing fails before the machine swaps or the
kernel kills the process, so a batch fits when the process's peak resident memory during its step
(``VmHWM`` after a reset, :mod:`pytest_dmlbench.measure.memory`) stays within ``memory_mb``. The model
passed in is never changed: steps run on a copy.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from pytest_dmlbench.errors import BatchSearchError
from pytest_dmlbench.measure.memory import MB, current_rss_bytes, peak_rss_bytes, release_freed_memory, reset_peak_rss

DEFAULT_LIMIT = 1 << 16
DEFAULT_AVAILABLE_SHARE = 0.5
"""Without ``memory_mb`` on CPU the budget is the current RSS plus this share of the available memory."""


@dataclass
class BatchSearch:
    """The answer and every batch size tried, in order, with whether it fitted."""

    largest: int
    trials: list[tuple[int, bool]] = field(default_factory=list)


def largest_fitting(fits: Callable[[int], bool], *, start: int = 1, limit: int = DEFAULT_LIMIT) -> BatchSearch:
    """The largest batch size in [start, limit] for which ``fits`` holds, assuming it holds up to some size
    and fails beyond: double from ``start`` until a size fails (or ``limit``), then bisect. ``largest`` is 0
    when ``start`` itself does not fit."""
    if not 1 <= start <= limit:
        raise ValueError(f"need 1 <= start <= limit, got start={start}, limit={limit}")
    search = BatchSearch(0)

    def attempt(size: int) -> bool:
        ok = bool(fits(size))
        search.trials.append((size, ok))
        return ok

    if not attempt(start):
        return search
    good, bad = start, None
    while bad is None:
        candidate = min(good * 2, limit)
        if candidate == good:
            search.largest = good
            return search
        if attempt(candidate):
            good = candidate
        else:
            bad = candidate
    while bad - good > 1:
        middle = (good + bad) // 2
        if attempt(middle):
            good = middle
        else:
            bad = middle
    search.largest = good
    return search


def training_step(model: Any, sample: tuple[Any, Any], device: Any, loss_fn: Callable[..., Any] | None,
                  lr: float) -> Callable[[int], None]:
    """One SGD step on a copy of ``model`` with ``sample`` (one example, no batch dimension) repeated."""
    import torch
    import torch.nn.functional as F

    trained = copy.deepcopy(model).to(device).train()
    optimizer = torch.optim.SGD(trained.parameters(), lr=lr)
    criterion = loss_fn or F.cross_entropy
    inputs, targets = (torch.as_tensor(t).to(device) for t in sample)

    def step(batch: int) -> None:
        x = inputs.unsqueeze(0).expand(batch, *inputs.shape).contiguous()
        y = targets.unsqueeze(0).expand(batch, *targets.shape).contiguous()
        optimizer.zero_grad(set_to_none=True)
        loss = criterion(trained(x), y)
        loss.backward()
        optimizer.step()

    return step


def cpu_step_fits(step: Callable[[int], None], memory_mb: float) -> Callable[[int], bool]:
    """A ``fits`` test: the process's peak RSS during ``step(batch)`` is at most ``memory_mb``.

    A batch whose peak, extrapolated from the last measured batch, would exceed twice the budget is not
    run (so the doubling cannot drive the machine into swapping)."""
    measured: dict[str, float] = {}

    def fits(batch: int) -> bool:
        if "per_sample" in measured:
            predicted = measured["base"] + measured["per_sample"] * batch
            if predicted > 2 * memory_mb * MB:
                return False
        release_freed_memory()
        before = current_rss_bytes()
        if not reset_peak_rss() or before is None:
            raise BatchSearchError(
                "the peak resident memory of a step cannot be measured here (/proc/self/clear_refs is not "
                "writable); run on Linux, or on CUDA"
            )
        step(batch)
        peak = peak_rss_bytes()
        assert peak is not None  # VmHWM exists wherever clear_refs does
        measured["base"], measured["per_sample"] = before, max(peak - before, 0) / batch
        release_freed_memory()
        return peak <= memory_mb * MB

    return fits


def cuda_step_fits(step: Callable[[int], None], device: Any, memory_mb: float | None,
                   cuda: Any = None) -> Callable[[int], bool]:
    """A ``fits`` test: ``step(batch)`` raises no CUDA out-of-memory error, and with ``memory_mb`` its
    ``max_memory_allocated`` stays within it. Other errors propagate. ``cuda`` replaces ``torch.cuda``
    (tests without a GPU)."""
    import torch

    api = torch.cuda if cuda is None else cuda

    def fits(batch: int) -> bool:
        api.empty_cache()
        api.reset_peak_memory_stats(device)
        try:
            step(batch)
            api.synchronize(device)
        except torch.cuda.OutOfMemoryError:  # the same class as newer torch's torch.OutOfMemoryError
            api.empty_cache()
            return False
        if memory_mb is None:
            return True
        return bool(api.max_memory_allocated(device) <= memory_mb * MB)

    return fits


def default_cpu_budget_mb() -> float:
    import psutil

    rss = current_rss_bytes() or 0
    return (rss + DEFAULT_AVAILABLE_SHARE * psutil.virtual_memory().available) / MB


def max_batch_size(model: Any, sample: tuple[Any, Any], *, device: Any, memory_mb: float | None = None,
                   loss_fn: Callable[..., Any] | None = None, lr: float = 0.01, start: int = 1,
                   limit: int = DEFAULT_LIMIT) -> int:
    """The largest batch (between ``start`` and ``limit``) for which one training step of ``model`` on
    ``sample`` (an ``(input, target)`` pair of one example) completes on ``device``.

    CUDA: no out-of-memory error (and ``max_memory_allocated`` <= ``memory_mb`` when given). CPU: peak
    resident memory of this process <= ``memory_mb`` (default: current RSS plus half the available
    memory). Raises :class:`BatchSearchError` when not even ``start`` fits.
    """
    import torch

    target = torch.device(device)
    step = training_step(model, sample, target, loss_fn, lr)
    if target.type == "cuda":
        fits = cuda_step_fits(step, target, memory_mb)
        budget = "the device's memory" if memory_mb is None else f"{memory_mb:g} MB of CUDA memory"
    elif target.type == "cpu":
        budget_mb = default_cpu_budget_mb() if memory_mb is None else float(memory_mb)
        fits = cpu_step_fits(step, budget_mb)
        budget = f"a peak RSS of {budget_mb:.0f} MB (now {(current_rss_bytes() or 0) / MB:.0f} MB)"
    else:
        raise BatchSearchError(f"max_batch_size supports cpu and cuda devices, got {target}")
    search = largest_fitting(fits, start=start, limit=limit)
    if search.largest == 0:
        raise BatchSearchError(
            f"not even a batch of {start} completes a training step within {budget}; "
            "give a larger memory_mb, a smaller start, or a smaller model"
        )
    return search.largest
