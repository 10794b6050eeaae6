"""Synthetic, learnable data sets: labels come from a fixed random teacher, so a model can fit them.

Every generator is deterministic in ``seed`` (its own ``torch.Generator``; the global RNG is untouched).
"""

from __future__ import annotations

import torch


def _generator(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def synthetic_classification(
    n: int,
    shape: tuple[int, ...] = (32,),
    num_classes: int = 10,
    *,
    seed: int = 0,
    dtype: torch.dtype = torch.float32,
) -> tuple[torch.Tensor, torch.Tensor]:
    """``(x, y)``: standard-normal inputs of ``shape``, labels ``argmax(W x)`` of a random teacher ``W``."""
    gen = _generator(seed)
    x = torch.randn((n, *shape), generator=gen, dtype=torch.float64)
    teacher = torch.randn(x[0].numel(), num_classes, generator=gen, dtype=torch.float64)
    y = (x.reshape(n, -1) @ teacher).argmax(dim=1)
    return x.to(dtype), y


def synthetic_images(
    n: int, num_classes: int = 10, size: int = 32, *, seed: int = 0, dtype: torch.dtype = torch.float32
) -> tuple[torch.Tensor, torch.Tensor]:
    """CIFAR-shaped ``(n, 3, size, size)`` images with teacher labels."""
    return synthetic_classification(n, (3, size, size), num_classes, seed=seed, dtype=dtype)


def synthetic_segmentation(
    n: int,
    channels: int = 3,
    size: int = 32,
    num_classes: int = 2,
    *,
    seed: int = 0,
    dtype: torch.dtype = torch.float32,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Images ``(n, channels, size, size)`` and per-pixel labels ``(n, size, size)``.

    The label of a pixel is the teacher's class for the average of its 3x3 neighbourhood, so a small
    convolutional net can learn it.
    """
    gen = _generator(seed)
    x = torch.randn((n, channels, size, size), generator=gen, dtype=torch.float64)
    teacher = torch.randn(num_classes, channels, generator=gen, dtype=torch.float64)
    smooth = torch.nn.functional.avg_pool2d(x, 3, stride=1, padding=1, count_include_pad=False)
    y = torch.einsum("kc,nchw->nkhw", teacher, smooth).argmax(dim=1)
    return x.to(dtype), y


def token_sequences(
    n: int, seq_len: int = 16, vocab_size: int = 64, num_classes: int = 2, *, seed: int = 0
) -> tuple[torch.Tensor, torch.Tensor]:
    """int64 tokens ``(n, seq_len)`` and labels from a bag-of-tokens teacher (learnable by mean pooling)."""
    gen = _generator(seed)
    tokens = torch.randint(0, vocab_size, (n, seq_len), generator=gen)
    weights = torch.randn(vocab_size, num_classes, generator=gen, dtype=torch.float64)
    y = weights[tokens].sum(dim=1).argmax(dim=1)
    return tokens, y
