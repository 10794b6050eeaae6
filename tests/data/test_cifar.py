"""The CIFAR-10 reader, on small files written here in the official python-pickle format."""

from __future__ import annotations

import pickle
from pathlib import Path

import numpy as np
import pytest
import torch

from pytest_dmlbench.data import DataError, load_cifar10

NAMES = [b"airplane", b"automobile", b"bird", b"cat", b"deer", b"dog", b"frog", b"horse", b"ship", b"truck"]


def write_batch(path: Path, data: np.ndarray, labels: list[int]) -> None:
    with path.open("wb") as handle:
        pickle.dump({b"batch_label": b"x", b"labels": labels, b"data": data, b"filenames": []}, handle)


@pytest.fixture
def cifar_dir(tmp_path: Path) -> Path:
    rng = np.random.default_rng(0)
    for i in range(1, 6):
        data = rng.integers(0, 256, size=(3, 3072), dtype=np.uint8)
        write_batch(tmp_path / f"data_batch_{i}", data, [i, (i + 1) % 10, (i + 2) % 10])
    write_batch(tmp_path / "test_batch", np.zeros((2, 3072), dtype=np.uint8), [0, 9])
    with (tmp_path / "batches.meta").open("wb") as handle:
        pickle.dump({b"label_names": NAMES, b"num_vis": 3072}, handle)
    return tmp_path


def test_reads_train_and_test_batches(cifar_dir: Path) -> None:
    images, labels, names = load_cifar10(cifar_dir)
    assert images.shape == (15, 3, 32, 32) and images.dtype == torch.float32
    assert labels.tolist()[:3] == [1, 2, 3] and labels.dtype == torch.int64
    assert names[0] == "airplane" and len(names) == 10
    test_images, test_labels, _ = load_cifar10(cifar_dir, train=False)
    assert test_images.shape == (2, 3, 32, 32) and test_labels.tolist() == [0, 9]


def test_pixel_layout_is_channel_planes_row_by_row(tmp_path: Path, cifar_dir: Path) -> None:
    row = np.zeros(3072, dtype=np.uint8)
    row[0] = 255  # red, top-left
    row[1024 + 32] = 255  # green, second row, first column
    row[2048 + 1023] = 255  # blue, bottom-right
    write_batch(cifar_dir / "test_batch", row[None, :], [4])
    image = load_cifar10(cifar_dir, train=False)[0][0]
    assert image[0, 0, 0] == 1.0 and image[1, 1, 0] == 1.0 and image[2, 31, 31] == 1.0
    assert float(image.sum()) == 3.0


def test_missing_file_names_the_file_and_the_download(cifar_dir: Path) -> None:
    (cifar_dir / "data_batch_3").unlink()
    with pytest.raises(DataError, match=r"CIFAR-10 file missing: .*data_batch_3\nDownload https://"):
        load_cifar10(cifar_dir)


def test_missing_folder_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(DataError, match="CIFAR-10 folder not found"):
        load_cifar10(tmp_path / "nowhere")


def test_truncated_file_is_reported_as_corrupt(cifar_dir: Path) -> None:
    path = cifar_dir / "data_batch_2"
    path.write_bytes(path.read_bytes()[:100])
    with pytest.raises(DataError, match=r"data_batch_2 is corrupt"):
        load_cifar10(cifar_dir)


def test_wrong_shape_is_reported(cifar_dir: Path) -> None:
    write_batch(cifar_dir / "data_batch_1", np.zeros((2, 100), dtype=np.uint8), [0, 1])
    with pytest.raises(DataError, match=r"data must be uint8 of shape \(N, 3072\)"):
        load_cifar10(cifar_dir)


def test_label_count_mismatch_is_reported(cifar_dir: Path) -> None:
    write_batch(cifar_dir / "data_batch_1", np.zeros((2, 3072), dtype=np.uint8), [0])
    with pytest.raises(DataError, match="2 images but 1 labels"):
        load_cifar10(cifar_dir)


def test_bad_meta_is_reported(cifar_dir: Path) -> None:
    with (cifar_dir / "batches.meta").open("wb") as handle:
        pickle.dump({b"label_names": NAMES[:3]}, handle)
    with pytest.raises(DataError, match="10 class names"):
        load_cifar10(cifar_dir)
