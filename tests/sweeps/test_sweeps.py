"""The max-batch-size finder on a model whose memory per sample is known, its search logic, and the
data-loader saturation rule."""

from __future__ import annotations

from typing import Any

import pytest
import torch
from torch import nn

from pytest_dmlbench.measure.memory import MB, current_rss_bytes, release_freed_memory, reset_peak_rss
from pytest_dmlbench.sweeps import BatchSearchError, largest_fitting, max_batch_size
from pytest_dmlbench.sweeps.loader import AugmentedImages, saturation_point
from pytest_dmlbench.sweeps.maxbatch import cuda_step_fits

PER_SAMPLE_MB = 4.0


class _HoldPerSample(torch.autograd.Function):
    """Forward keeps ``floats`` float32 values per sample alive until backward; ``touch`` writes them
    (resident memory) or leaves them unwritten (virtual only: the kernel never backs the pages)."""

    @staticmethod
    def forward(ctx: Any, x: torch.Tensor, floats: int, touch: bool) -> torch.Tensor:
        make = torch.ones if touch else torch.empty
        held = make(x.shape[0], floats, device=x.device)
        ctx.save_for_backward(held)
        return x.clone()

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor, None, None]:
        return grad, None, None


class KnownMemoryModel(nn.Module):
    """A tiny linear model whose training step holds exactly ``mb_per_sample`` MB per sample."""

    def __init__(self, mb_per_sample: float, touch: bool = True) -> None:
        super().__init__()
        self.linear = nn.Linear(4, 2)
        self.floats = int(mb_per_sample * MB / 4)
        self.touch = touch

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        held: torch.Tensor = _HoldPerSample.apply(x, self.floats, self.touch)
        out: torch.Tensor = self.linear(held)
        return out


SAMPLE = (torch.zeros(4), torch.tensor(1))


@pytest.fixture(scope="module")
def warm() -> None:
    """One search first, so one-time costs (libraries, thread pools) are paid before RSS is read."""
    if not reset_peak_rss():
        pytest.skip("/proc/self/clear_refs is not writable here: peak RSS per step cannot be measured")
    max_batch_size(KnownMemoryModel(PER_SAMPLE_MB), SAMPLE, device="cpu", memory_mb=headroom_budget(1000.0),
                   limit=8)


def headroom_budget(headroom_mb: float) -> float:
    release_freed_memory()
    return (current_rss_bytes() or 0) / MB + headroom_mb


@pytest.mark.parametrize(("mb_per_sample", "headroom_mb"), [(4.0, 40.0), (4.0, 100.0), (8.0, 100.0)])
def test_cpu_finder_matches_the_known_memory_per_sample(warm: None, mb_per_sample: float,
                                                        headroom_mb: float) -> None:
    found = max_batch_size(KnownMemoryModel(mb_per_sample), SAMPLE, device="cpu",
                           memory_mb=headroom_budget(headroom_mb))
    expected = int(headroom_mb // mb_per_sample)  # 10, 25, 12: what the budget holds
    assert expected - 2 <= found <= expected + 1, (found, expected)


def test_negative_control_memory_that_is_never_touched_does_not_count(warm: None) -> None:
    """The same model holding unwritten (never resident) buffers fits any batch up to the limit: the finder
    measures resident memory, and the bound checked above fails for a model whose memory is not real."""
    found = max_batch_size(KnownMemoryModel(PER_SAMPLE_MB, touch=False), SAMPLE, device="cpu",
                           memory_mb=headroom_budget(40.0), limit=256)
    assert found == 256
    assert not 40 // PER_SAMPLE_MB - 2 <= found <= 40 // PER_SAMPLE_MB + 1


def test_a_budget_below_the_current_memory_is_a_clear_error(warm: None) -> None:
    with pytest.raises(BatchSearchError, match=r"not even a batch of 1 completes a training step within a peak "
                                               r"RSS of \d+ MB \(now \d+ MB\); give a larger memory_mb"):
        max_batch_size(KnownMemoryModel(PER_SAMPLE_MB), SAMPLE, device="cpu", memory_mb=10.0)


def test_the_callers_model_is_not_trained() -> None:
    model = KnownMemoryModel(0.01)
    before = [p.detach().clone() for p in model.parameters()]
    max_batch_size(model, SAMPLE, device="cpu", memory_mb=1e6, limit=4)
    assert all(torch.equal(a, b) for a, b in zip(before, model.parameters(), strict=True))


def test_search_doubles_then_bisects() -> None:
    search = largest_fitting(lambda batch: batch <= 37, start=1, limit=1 << 16)
    assert search.largest == 37
    assert [size for size, _ in search.trials] == [1, 2, 4, 8, 16, 32, 64, 48, 40, 36, 38, 37]
    assert largest_fitting(lambda batch: True, limit=100).largest == 100
    assert largest_fitting(lambda batch: False).largest == 0
    with pytest.raises(ValueError, match="need 1 <= start <= limit"):
        largest_fitting(lambda batch: True, start=0)


def test_cuda_search_logic_with_a_fake_step() -> None:
    """Mocked device: this machine has no GPU. A fake step raises torch's CUDA out-of-memory error above 300
    samples; the CUDA test treats exactly that error as "does not fit" and lets every other error through.
    (On a machine with a GPU, tests/sweeps/test_sweeps_cuda.py runs the real thing.)"""

    def step(batch: int) -> None:
        if batch > 300:
            raise torch.cuda.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB")

    calls: list[str] = []
    fake_cuda = _FakeCuda(calls)
    fits = cuda_step_fits(step, "cuda:0", None, cuda=fake_cuda)
    assert largest_fitting(fits).largest == 300
    assert calls.count("empty_cache") >= 1

    def broken(batch: int) -> None:
        raise RuntimeError("CUDA error: an illegal memory access was encountered")

    with pytest.raises(RuntimeError, match="illegal memory access"):
        largest_fitting(cuda_step_fits(broken, "cuda:0", None, cuda=fake_cuda))
    budgeted = cuda_step_fits(lambda batch: fake_cuda.allocate(batch * 2 * MB), "cuda:0", 100.0, cuda=fake_cuda)
    assert largest_fitting(budgeted).largest == 50


class _FakeCuda:
    """The few ``torch.cuda`` calls the CUDA test makes, recorded; allocations tracked by hand."""

    def __init__(self, calls: list[str]) -> None:
        self.calls = calls
        self.peak = 0.0

    def allocate(self, nbytes: float) -> None:
        self.peak = max(self.peak, nbytes)

    def empty_cache(self) -> None:
        self.calls.append("empty_cache")

    def reset_peak_memory_stats(self, device: object) -> None:
        self.peak = 0.0

    def synchronize(self, device: object) -> None:
        self.calls.append("synchronize")

    def max_memory_allocated(self, device: object) -> float:
        return self.peak


def test_saturation_point_is_the_fewest_workers_near_the_best() -> None:
    assert saturation_point({0: 40.0, 1: 90.0, 2: 100.0, 4: 98.0}) == 2
    assert saturation_point({0: 100.0, 1: 97.0, 2: 60.0}) == 0
    assert saturation_point({0: 10.0, 1: 20.0, 2: 30.0, 4: 40.0}) == 4
    with pytest.raises(ValueError, match="at least one"):
        saturation_point({})


def test_sweep_dataset_is_deterministic_and_normalised() -> None:
    data = AugmentedImages(8, seed=3)
    image, label = data[5]
    again, label_again = AugmentedImages(8, seed=3)[5]
    assert image.shape == (3, 32, 32) and torch.equal(image, again) and int(label) == int(label_again)
    assert abs(float(image.mean())) < 1e-4 and not torch.equal(image, data[4][0])
    with pytest.raises(ValueError, match="length >= 1"):
        AugmentedImages(0)
