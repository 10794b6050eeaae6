"""Data-loader sweeps: samples/s of a ``DataLoader`` over ``num_workers`` x batch size, and where more
workers stop helping.

The cases live in ``bench_cases/test_loader_sweeps.py``; this module holds the parts they share with the
plots: a dataset with a fixed per-sample CPU cost (decoding and augmenting, as image pipelines do) and
the saturation rule.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

SATURATION_TOLERANCE = 0.05
"""More workers "help" only while they raise samples/s by more than this share of the best figure."""


def saturation_point(samples_per_s: Mapping[int, float], tolerance: float = SATURATION_TOLERANCE) -> int:
    """The fewest workers whose samples/s is within ``tolerance`` of the best of the sweep: adding workers
    beyond it does not help on this machine."""
    if not samples_per_s:
        raise ValueError("saturation_point needs at least one (num_workers, samples/s) point")
    best = max(samples_per_s.values())
    return min(w for w, value in samples_per_s.items() if value >= best * (1.0 - tolerance))


class AugmentedImages:
    """``length`` CIFAR-sized images made on the fly with a fixed per-sample cost: random crop with padding,
    horizontal flip and per-channel normalisation, ``work`` times over (a stand-in for decoding)."""

    def __init__(self, length: int, *, image_size: int = 32, classes: int = 10, work: int = 4, seed: int = 0):
        if length < 1 or work < 1:
            raise ValueError(f"AugmentedImages needs length >= 1 and work >= 1, got {length}, {work}")
        self.length, self.image_size, self.classes, self.work, self.seed = length, image_size, classes, work, seed

    def __len__(self) -> int:
        return self.length

    def __getitem__(self, index: int) -> tuple[Any, Any]:
        import torch
        import torch.nn.functional as F

        generator = torch.Generator().manual_seed(self.seed * 1_000_003 + index)
        size = self.image_size
        image = torch.rand(3, size, size, generator=generator)
        for _ in range(self.work):
            padded = F.pad(image, (4, 4, 4, 4), mode="reflect")
            top, left = (int(v) for v in torch.randint(0, 9, (2,), generator=generator))
            image = padded[:, top : top + size, left : left + size]
            if bool(torch.randint(0, 2, (1,), generator=generator)):
                image = image.flip(-1)
            mean = image.mean(dim=(1, 2), keepdim=True)
            std = image.std(dim=(1, 2), keepdim=True).clamp_min(1e-6)
            image = (image - mean) / std
        label = torch.randint(0, self.classes, (), generator=generator)
        return image.contiguous(), label
