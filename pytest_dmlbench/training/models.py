"""Model zoo for the cases: deterministic builders (same seed, same weights on every rank).

Every builder takes ``seed`` and returns a freshly initialised ``nn.Module`` (float32; call
``.double()`` for float64 checks). Models that a pipeline can split are ``nn.Sequential`` or expose
``pipeline_stages(n)``.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import Any

import torch
from torch import nn

from pytest_dmlbench.errors import ConfigError


@contextlib.contextmanager
def seeded(seed: int) -> Iterator[None]:
    """Run the block with torch's CPU generator seeded, restoring the previous state afterwards."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        yield


def tiny_mlp(in_features: int = 32, hidden: int = 64, num_classes: int = 10, *, seed: int = 0) -> nn.Sequential:
    """Two-layer perceptron: Linear -> ReLU -> Linear."""
    with seeded(seed):
        return nn.Sequential(nn.Linear(in_features, hidden), nn.ReLU(), nn.Linear(hidden, num_classes))


def small_cnn(
    num_classes: int = 10, channels: tuple[int, int] = (32, 64), hidden: int = 128, *, seed: int = 0
) -> nn.Sequential:
    """The classic small CIFAR CNN: two 3x3 conv + 2x2 max-pool blocks, then two fully connected layers.

    Input ``(N, 3, 32, 32)``; 32 -> conv 30 -> pool 15 -> conv 13 -> pool 6.
    """
    c1, c2 = channels
    with seeded(seed):
        return nn.Sequential(
            nn.Conv2d(3, c1, 3),
            nn.ReLU(),
            nn.MaxPool2d(2),
            nn.Conv2d(c1, c2, 3),
            nn.ReLU(),
            nn.MaxPool2d(2),
            nn.Flatten(),
            nn.Linear(c2 * 6 * 6, hidden),
            nn.ReLU(),
            nn.Linear(hidden, num_classes),
        )


def small_bn_cnn(num_classes: int = 10, channels: int = 8, *, seed: int = 0) -> nn.Sequential:
    """A tiny conv net with BatchNorm, for the buffer-semantics checks. Input ``(N, 3, H, W)``."""
    with seeded(seed):
        return nn.Sequential(
            nn.Conv2d(3, channels, 3, padding=1),
            nn.BatchNorm2d(channels),
            nn.ReLU(),
            nn.AdaptiveAvgPool2d(1),
            nn.Flatten(),
            nn.Linear(channels, num_classes),
        )


def _cifar_resnet(depth: int, num_classes: int, seed: int) -> nn.Module:
    from torchvision.models import resnet18 as tv_resnet18
    from torchvision.models import resnet50 as tv_resnet50

    builder = {18: tv_resnet18, 50: tv_resnet50}[depth]
    with seeded(seed):
        model: nn.Module = builder(weights=None, num_classes=num_classes)
        model.conv1 = nn.Conv2d(3, 64, kernel_size=3, stride=1, padding=1, bias=False)
        model.maxpool = nn.Identity()
    return model


def resnet_layers(model: nn.Module) -> list[nn.Module]:
    """A torchvision ResNet as the consecutive layers its forward runs (for pipeline splitting)."""
    names = ["conv1", "bn1", "relu", "maxpool", "layer1", "layer2", "layer3", "layer4", "avgpool"]
    return [getattr(model, name) for name in names] + [nn.Flatten(1), model.fc]


def resnet18(num_classes: int = 10, *, seed: int = 0) -> nn.Sequential:
    """torchvision ResNet-18 with a CIFAR stem (3x3 stride-1 first conv, no max-pool), as a Sequential."""
    return nn.Sequential(*resnet_layers(_cifar_resnet(18, num_classes, seed)))


def resnet50(num_classes: int = 10, *, seed: int = 0) -> nn.Sequential:
    """torchvision ResNet-50 with a CIFAR stem, as a Sequential."""
    return nn.Sequential(*resnet_layers(_cifar_resnet(50, num_classes, seed)))


class _ConvBlock(nn.Sequential):
    def __init__(self, in_channels: int, out_channels: int) -> None:
        super().__init__(
            nn.Conv2d(in_channels, out_channels, 3, padding=1),
            nn.BatchNorm2d(out_channels),
            nn.ReLU(inplace=True),
            nn.Conv2d(out_channels, out_channels, 3, padding=1),
            nn.BatchNorm2d(out_channels),
            nn.ReLU(inplace=True),
        )


class SmallUNet(nn.Module):
    """A two-level UNet: per-pixel class logits ``(N, num_classes, H, W)`` for ``H, W`` divisible by 4."""

    def __init__(self, in_channels: int = 3, num_classes: int = 2, base: int = 8) -> None:
        super().__init__()
        self.down1 = _ConvBlock(in_channels, base)
        self.down2 = _ConvBlock(base, base * 2)
        self.bottom = _ConvBlock(base * 2, base * 4)
        self.pool = nn.MaxPool2d(2)
        self.up2 = nn.ConvTranspose2d(base * 4, base * 2, 2, stride=2)
        self.dec2 = _ConvBlock(base * 4, base * 2)
        self.up1 = nn.ConvTranspose2d(base * 2, base, 2, stride=2)
        self.dec1 = _ConvBlock(base * 2, base)
        self.head = nn.Conv2d(base, num_classes, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        d1 = self.down1(x)
        d2 = self.down2(self.pool(d1))
        b = self.bottom(self.pool(d2))
        u2 = self.dec2(torch.cat([self.up2(b), d2], dim=1))
        u1 = self.dec1(torch.cat([self.up1(u2), d1], dim=1))
        out: torch.Tensor = self.head(u1)
        return out


def small_unet(in_channels: int = 3, num_classes: int = 2, base: int = 8, *, seed: int = 0) -> SmallUNet:
    """A small UNet for the synthetic segmentation data."""
    with seeded(seed):
        return SmallUNet(in_channels, num_classes, base)


class TransformerClassifier(nn.Module):
    """Token embedding + learned positions -> Transformer encoder -> mean pool -> linear classifier.

    Dropout is 0 so that every rank and the reference compute the same function.
    """

    def __init__(self, vocab_size: int, seq_len: int, d_model: int, nhead: int, layers: int, num_classes: int) -> None:
        super().__init__()
        self.embed = nn.Embedding(vocab_size, d_model)
        self.position = nn.Parameter(torch.randn(seq_len, d_model) * 0.02)
        layer = nn.TransformerEncoderLayer(d_model, nhead, dim_feedforward=2 * d_model, dropout=0.0, batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)
        self.head = nn.Linear(d_model, num_classes)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        hidden = self.encoder(self.embed(tokens) + self.position[: tokens.shape[1]])
        out: torch.Tensor = self.head(hidden.mean(dim=1))
        return out


def small_transformer(
    vocab_size: int = 64,
    seq_len: int = 16,
    d_model: int = 32,
    nhead: int = 4,
    layers: int = 2,
    num_classes: int = 2,
    *,
    seed: int = 0,
) -> TransformerClassifier:
    """A small Transformer encoder for sequence classification (input: int64 tokens ``(N, seq_len)``)."""
    with seeded(seed):
        return TransformerClassifier(vocab_size, seq_len, d_model, nhead, layers, num_classes)


MODELS: dict[str, Callable[..., nn.Module]] = {
    "mlp": tiny_mlp,
    "cnn": small_cnn,
    "bn_cnn": small_bn_cnn,
    "resnet18": resnet18,
    "resnet50": resnet50,
    "unet": small_unet,
    "transformer": small_transformer,
}


def build_model(name: str, *, seed: int = 0, **kwargs: Any) -> nn.Module:
    """Build zoo model ``name`` (see :data:`MODELS`) with ``seed`` and the builder's own options."""
    builder = MODELS.get(name)
    if builder is None:
        raise ConfigError(f"unknown model {name!r}; available: {', '.join(sorted(MODELS))}")
    return builder(seed=seed, **kwargs)
