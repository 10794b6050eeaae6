"""Data-loader sweeps (seed 002's tuning study, seed 003's lesson): samples/s of a ``DataLoader`` alone and
of loader plus a training step, over ``num_workers`` x batch size, on a dataset with a fixed per-sample CPU
cost (random crop, flip and normalisation, as image pipelines do).

The plots (``--dmlbench-plots`` or ``python -m pytest_dmlbench plot``) draw samples/s against workers per
batch size and mark where more workers stop helping. On a 2-core machine that happens early: every worker
competes with the training step (and the other workers) for the same two cores.
"""

from __future__ import annotations

from typing import Any, cast

import pytest
import torch
import torch.nn.functional as F
from torch.utils.data import DataLoader, Dataset

from pytest_dmlbench.sweeps.loader import AugmentedImages
from pytest_dmlbench.training import models

WORKERS = [0, 1, 2, 4]
BATCH_SIZES = [32, 128]
MODES = ["loader", "loader+step"]
BATCHES_PER_ROUND = 4
ROUNDS = 4
WARMUP = 1


@pytest.mark.dmlbench(world_size=1, timeout=600)
@pytest.mark.dmlbench_smoke("batch_size", "num_workers")
@pytest.mark.parametrize("mode", MODES, ids=MODES)
@pytest.mark.parametrize("batch_size", BATCH_SIZES, ids=[f"bs{b}" for b in BATCH_SIZES])
@pytest.mark.parametrize("num_workers", WORKERS, ids=[f"workers{w}" for w in WORKERS])
def test_loader_sweep(dist: Any, dmlbench: Any, num_workers: int, batch_size: int, mode: str) -> None:
    """Samples/s of one round = one epoch of ``BATCHES_PER_ROUND`` batches: the loader alone, or loader plus
    an SGD step of the seed studies' small CNN. Each round iterates the loader afresh, so worker start-up is
    timed, as it is every epoch with DataLoader's default ``persistent_workers=False`` (and workers cannot
    prepare batches while the clock is stopped between rounds). The case runs on one intra-op thread, as
    the workers do, so the other core is what workers can use."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        run_sweep_point(dmlbench, num_workers, batch_size, mode == "loader+step")
    finally:
        torch.set_num_threads(threads)


def run_sweep_point(dmlbench: Any, num_workers: int, batch_size: int, train: bool) -> None:
    dataset = AugmentedImages(batch_size * BATCHES_PER_ROUND, seed=0)
    # DataLoader takes any map-style dataset (a length and items by index); torch types it as its Dataset class
    loader = DataLoader(cast("Dataset[tuple[torch.Tensor, int]]", dataset), batch_size=batch_size,
                        num_workers=num_workers, shuffle=False)
    model = models.small_cnn(seed=0)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    seen = [0]
    calls = [0]  # rounds x calls per round, as the measurement (or a paired gate's block) chose them

    def one_round() -> None:
        calls[0] += 1
        for inputs, targets in loader:
            seen[0] += len(inputs)
            if train:
                optimizer.zero_grad(set_to_none=True)
                F.cross_entropy(model(inputs), targets).backward()  # type: ignore[no-untyped-call]  # untyped in torch
                optimizer.step()

    dmlbench.pedantic(one_round, rounds=ROUNDS, warmup=WARMUP,
                      samples_per_call=batch_size * BATCHES_PER_ROUND)
    assert calls[0] > 0 and seen[0] == batch_size * BATCHES_PER_ROUND * calls[0], "the loader delivered short batches"
