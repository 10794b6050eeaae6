"""Data-poisoning attacks as dataset wrappers, and the backdoor's attack success rate."""

from __future__ import annotations

from collections.abc import Sized
from dataclasses import dataclass
from typing import Any, cast

import torch
from torch import Tensor
from torch.utils.data import DataLoader, Dataset

_CORNERS = ("bottom_right", "bottom_left", "top_right", "top_left")


@dataclass(frozen=True)
class Trigger:
    """A square patch of ``size`` x ``size`` pixels set to ``value`` in one corner of the image."""

    size: int = 3
    value: float = 1.0
    corner: str = "bottom_right"

    def __post_init__(self) -> None:
        if self.size < 1:
            raise ValueError(f"Trigger size must be >= 1, got {self.size}")
        if self.corner not in _CORNERS:
            raise ValueError(f"Trigger corner must be one of {', '.join(_CORNERS)}, got {self.corner!r}")


def apply_trigger(image: Tensor, trigger: Trigger) -> Tensor:
    """Copy of ``image`` (``(..., H, W)``) with the trigger patch stamped in its corner."""
    height, width = image.shape[-2:]
    if trigger.size > min(height, width):
        raise ValueError(f"trigger of size {trigger.size} does not fit an image of {height}x{width}")
    size = trigger.size
    rows = slice(height - size, height) if trigger.corner.startswith("bottom") else slice(0, size)
    cols = slice(width - size, width) if trigger.corner.endswith("right") else slice(0, size)
    out = image.clone()
    out[..., rows, cols] = trigger.value
    return out


class LabelFlipDataset(Dataset[tuple[Any, int]]):
    """Wraps a classification dataset, replacing each label y by C-1-y (C = ``num_classes``)."""

    def __init__(self, dataset: Dataset[Any], num_classes: int) -> None:
        if num_classes < 2:
            raise ValueError(f"label_flip needs num_classes >= 2, got {num_classes}")
        self.dataset = dataset
        self.num_classes = num_classes

    def __len__(self) -> int:
        return len(cast(Sized, self.dataset))

    def __getitem__(self, index: int) -> tuple[Any, int]:
        sample, label = self.dataset[index]
        label = int(label)
        if not 0 <= label < self.num_classes:
            raise ValueError(f"label {label} at index {index} is outside [0, {self.num_classes})")
        return sample, self.num_classes - 1 - label


class BackdoorDataset(Dataset[tuple[Tensor, int]]):
    """Wraps an image dataset: a seeded ``fraction`` of the samples get the trigger and label ``target``.

    The poisoned indices are fixed at construction (``poisoned``), so every epoch and every rank that
    builds the wrapper with the same seed sees the same poison.
    """

    def __init__(
        self,
        dataset: Dataset[Any],
        *,
        target: int,
        fraction: float = 0.1,
        trigger: Trigger | None = None,
        seed: int = 0,
    ) -> None:
        if not 0.0 <= fraction <= 1.0:
            raise ValueError(f"backdoor fraction must be in [0, 1], got {fraction}")
        self.dataset = dataset
        self.target = target
        self.trigger = trigger or Trigger()
        size = len(cast(Sized, dataset))
        count = round(fraction * size)
        order = torch.randperm(size, generator=torch.Generator().manual_seed(seed))
        self.poisoned = frozenset(order[:count].tolist())

    def __len__(self) -> int:
        return len(cast(Sized, self.dataset))

    def __getitem__(self, index: int) -> tuple[Tensor, int]:
        image, label = self.dataset[index]
        if index in self.poisoned:
            return apply_trigger(image, self.trigger), self.target
        return image, int(label)


@torch.no_grad()
def attack_success_rate(
    model: torch.nn.Module, dataset: Dataset[Any], trigger: Trigger, target: int, batch_size: int = 256
) -> float:
    """Share of the non-target inputs of ``dataset`` that ``model`` classifies as ``target`` once the
    trigger is stamped on them (the backdoor's attack success rate).
    """
    hits = total = 0
    was_training = model.training
    model.eval()
    try:
        for images, labels in DataLoader(dataset, batch_size=batch_size):
            keep = labels != target
            if not bool(keep.any()):
                continue
            predictions = model(apply_trigger(images[keep], trigger)).argmax(dim=1)
            hits += int((predictions == target).sum())
            total += int(keep.sum())
    finally:
        model.train(was_training)
    if total == 0:
        raise ValueError(f"attack_success_rate: the dataset has no input whose label differs from {target}")
    return hits / total
