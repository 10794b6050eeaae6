"""Label flip and backdoor dataset wrappers, and the attack success rate."""

from __future__ import annotations

import pytest
import torch
from torch.utils.data import TensorDataset

from pytest_dmlbench.robust import (
    BackdoorDataset,
    LabelFlipDataset,
    Trigger,
    apply_trigger,
    attack_success_rate,
)

IMAGES = torch.rand(50, 1, 8, 8) * 0.5
LABELS = torch.arange(50) % 5
DATA = TensorDataset(IMAGES, LABELS)


def test_label_flip_maps_y_to_c_minus_1_minus_y() -> None:
    flipped = LabelFlipDataset(DATA, num_classes=5)
    assert len(flipped) == 50
    for i in range(10):
        image, label = flipped[i]
        assert label == 4 - int(LABELS[i]) and torch.equal(image, IMAGES[i])


def test_label_flip_rejects_labels_outside_the_classes() -> None:
    with pytest.raises(ValueError, match="outside"):
        LabelFlipDataset(DATA, num_classes=3)[4]


def test_trigger_patch_in_the_chosen_corner_only() -> None:
    image = torch.zeros(1, 8, 8)
    stamped = apply_trigger(image, Trigger(size=2, value=1.0, corner="bottom_right"))
    assert stamped[0, 6:, 6:].eq(1).all() and stamped.sum() == 4
    assert image.sum() == 0  # not modified in place
    top_left = apply_trigger(image, Trigger(size=3, corner="top_left"))
    assert top_left[0, :3, :3].eq(1).all() and top_left.sum() == 9


def test_backdoor_poisons_the_configured_fraction_with_the_target() -> None:
    trigger = Trigger(size=2)
    poisoned = BackdoorDataset(DATA, target=0, fraction=0.2, trigger=trigger, seed=1)
    assert len(poisoned.poisoned) == 10
    assert poisoned.poisoned == BackdoorDataset(DATA, target=0, fraction=0.2, seed=1).poisoned
    assert poisoned.poisoned != BackdoorDataset(DATA, target=0, fraction=0.2, seed=2).poisoned
    for i in range(50):
        image, label = poisoned[i]
        if i in poisoned.poisoned:
            assert label == 0 and torch.equal(image, apply_trigger(IMAGES[i], trigger))
        else:
            assert label == int(LABELS[i]) and torch.equal(image, IMAGES[i])


class TriggerDetector(torch.nn.Module):
    """Predicts class 3 when the bottom-right pixel is 1 (the trigger), else the class of the mean."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        triggered = x[:, 0, -1, -1] == 1.0
        logits = torch.zeros(x.shape[0], 5)
        logits[:, 1] = 1.0
        logits[triggered, 3] = 2.0
        return logits


def test_attack_success_rate_of_a_backdoored_and_a_clean_model() -> None:
    trigger = Trigger(size=2)
    assert attack_success_rate(TriggerDetector(), DATA, trigger, target=3) == 1.0
    linear = torch.nn.Linear(64, 5)
    torch.nn.init.zeros_(linear.weight)
    with torch.no_grad():
        linear.bias.copy_(torch.tensor([0.0, 1.0, 0.0, 0.0, 0.0]))
    clean = torch.nn.Sequential(torch.nn.Flatten(), linear)
    assert attack_success_rate(clean, DATA, trigger, target=3) == 0.0
    # only non-target inputs count: 40 of the 50 labels differ from 3
    half = TriggerDetector()
    assert attack_success_rate(half, DATA, Trigger(size=2, corner="top_left"), target=3) == 0.0
