"""CIFAR-10 from the standard python-pickle batches in a local folder (nothing is downloaded).

Expected files (the ``cifar-10-batches-py`` folder of the official archive): ``data_batch_1`` ...
``data_batch_5``, ``test_batch`` and ``batches.meta``. Each batch is a pickled dict with ``b"data"``, a
``uint8`` array of shape ``(N, 3072)`` (1024 red, 1024 green, 1024 blue values of a 32x32 image, row by
row) and ``b"labels"``, N integers in 0..9. The files are pickles: only read folders you trust.
"""

from __future__ import annotations

import pickle
from pathlib import Path
from typing import Any

import numpy as np
import torch

from pytest_dmlbench.errors import DataError

CIFAR10_URL = "https://www.cs.toronto.edu/~kriz/cifar-10-python.tar.gz"
TRAIN_FILES = [f"data_batch_{i}" for i in range(1, 6)]
TEST_FILES = ["test_batch"]
META_FILE = "batches.meta"
_PIXELS = 3 * 32 * 32


def _read_pickle(path: Path) -> dict[Any, Any]:
    if not path.is_file():
        raise DataError(
            f"CIFAR-10 file missing: {path}\n"
            f"Download {CIFAR10_URL}, extract it and pass the 'cifar-10-batches-py' folder."
        )
    try:
        with path.open("rb") as handle:
            content = pickle.load(handle, encoding="bytes")
    except (pickle.UnpicklingError, EOFError, ValueError, TypeError, AttributeError, ImportError) as exc:
        raise DataError(
            f"CIFAR-10 file {path} is corrupt or not a CIFAR python batch ({type(exc).__name__}: {exc}); "
            "re-extract it from the official archive"
        ) from exc
    if not isinstance(content, dict):
        raise DataError(f"CIFAR-10 file {path} holds a {type(content).__name__}, expected a dict")
    return content


def _read_batch(path: Path) -> tuple[np.ndarray, np.ndarray]:
    content = _read_pickle(path)
    if b"data" not in content or b"labels" not in content:
        raise DataError(f"CIFAR-10 batch {path} lacks b'data' or b'labels' (keys: {sorted(content)})")
    data = np.asarray(content[b"data"])
    labels = np.asarray(content[b"labels"], dtype=np.int64)
    if data.dtype != np.uint8 or data.ndim != 2 or data.shape[1] != _PIXELS:
        raise DataError(
            f"CIFAR-10 batch {path}: data must be uint8 of shape (N, {_PIXELS}), got {data.dtype} {data.shape}"
        )
    if labels.shape != (data.shape[0],):
        raise DataError(f"CIFAR-10 batch {path}: {data.shape[0]} images but {labels.shape[0]} labels")
    if labels.size and (labels.min() < 0 or labels.max() > 9):
        raise DataError(f"CIFAR-10 batch {path}: labels must be in 0..9, got {labels.min()}..{labels.max()}")
    return data, labels


def load_cifar10(root: str | Path, *, train: bool = True) -> tuple[torch.Tensor, torch.Tensor, list[str]]:
    """``(images, labels, class_names)``: float32 ``(N, 3, 32, 32)`` in [0, 1], int64 labels, 10 names."""
    folder = Path(root)
    if not folder.is_dir():
        raise DataError(
            f"CIFAR-10 folder not found: {folder}\n"
            f"Download {CIFAR10_URL}, extract it and pass the 'cifar-10-batches-py' folder."
        )
    meta = _read_pickle(folder / META_FILE)
    names = meta.get(b"label_names")
    if not isinstance(names, list) or len(names) != 10:
        raise DataError(f"CIFAR-10 file {folder / META_FILE}: b'label_names' must list 10 class names")
    batches = [_read_batch(folder / name) for name in (TRAIN_FILES if train else TEST_FILES)]
    data = np.concatenate([b[0] for b in batches])
    labels = np.concatenate([b[1] for b in batches])
    images = torch.from_numpy(data).reshape(-1, 3, 32, 32).to(torch.float32).div_(255.0)
    class_names = [n.decode() if isinstance(n, bytes) else str(n) for n in names]
    return images, torch.from_numpy(labels), class_names
