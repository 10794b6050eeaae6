"""Each simulated rank's own random state, torch's private surfaces, per-rank communication counts, and DDP
with its options and communication hooks."""

from __future__ import annotations

import copy
import random
from typing import Any

import numpy as np
import pytest
import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
from torch.nn.parallel import DistributedDataParallel

from pytest_dmlbench.measure.comm import instrument_collectives, set_interceptor
from pytest_dmlbench.training import models
from pytest_dmlbench.world.simulated.compat import incompatibility
from tests.world.simulated.helpers import passed, simulate

N = 16


def draws(seed: int) -> tuple[list[float], list[float], list[float]]:
    """Two draws of each generator after seeding, as a process of its own would make them."""
    torch.manual_seed(seed)
    random.seed(seed)
    np.random.seed(seed)
    return ([torch.rand(1).item(), torch.rand(1).item()], [random.random(), random.random()],
            [float(np.random.rand()), float(np.random.rand())])


def test_each_rank_draws_from_its_own_random_state() -> None:
    expected = {rank: draws(1000 + rank) for rank in range(N)}
    seen: dict[int, Any] = {}

    def body(info: Any) -> None:
        torch.manual_seed(1000 + info.rank)
        random.seed(1000 + info.rank)
        np.random.seed(1000 + info.rank)
        first = torch.rand(1).item(), random.random(), float(np.random.rand())
        dist.barrier()  # every other rank seeds and draws here before this rank draws again
        second = torch.rand(1).item(), random.random(), float(np.random.rand())
        seen[info.rank] = tuple([a, b] for a, b in zip(first, second, strict=True))

    assert passed(simulate(body, N), N)
    assert seen == {rank: tuple(expected[rank]) for rank in range(N)}
    # the negative control: one process-wide generator would have given rank 0 another second draw
    torch.manual_seed(1000)
    torch.rand(1)
    for rank in range(1, N):
        torch.manual_seed(1000 + rank)
        torch.rand(1)
    assert torch.rand(1).item() != expected[0][0][1]


def test_this_torch_has_the_private_surfaces() -> None:
    assert incompatibility() == ""


def test_another_torch_series_is_a_skip_naming_the_difference() -> None:
    reason = incompatibility("2.99.0")
    assert reason.startswith("simulated ranks were tested with torch 2.14.x and rely on private torch surfaces; "
                             "this is torch 2.99.0. Run with --dmlbench-launcher fork")


def test_communication_counts_are_per_rank() -> None:
    counted: dict[int, int] = {}

    def body(info: Any) -> None:
        with instrument_collectives() as counter:
            dist.all_reduce(torch.ones(10, dtype=torch.float64))
        counted[info.rank] = sum(op.calls for op in counter.ops.values())

    assert passed(simulate(body, N), N)
    assert counted == {rank: 1 for rank in range(N)}


def test_an_interceptor_sees_its_own_ranks_calls() -> None:
    seen: dict[int, list[str]] = {}

    def body(info: Any) -> None:
        mine: list[str] = []

        def intercept(op: str, nbytes: int, call: Any) -> Any:
            mine.append(op)
            return call()

        set_interceptor(intercept)
        with instrument_collectives():
            dist.all_reduce(torch.ones(10, dtype=torch.float64))
            dist.broadcast(torch.ones(2), src=0)
        set_interceptor(None)
        seen[info.rank] = mine

    assert passed(simulate(body, N), N)
    assert seen == {rank: ["all_reduce", "broadcast"] for rank in range(N)}


@pytest.mark.parametrize("options", [
    {},
    {"find_unused_parameters": True},
    {"gradient_as_bucket_view": True},
    {"static_graph": True},
    {"bucket_cap_mb": 0.001},
    {"hook": "allreduce"},
    {"hook": "fp16"},
    {"no_sync": True},
], ids=["plain", "find_unused", "bucket_view", "static_graph", "small_buckets", "allreduce_hook", "fp16_hook",
        "no_sync"])
def test_ddp_equals_single_process_sgd(options: dict[str, Any]) -> None:
    options = dict(options)
    hook, no_sync = options.pop("hook", None), options.pop("no_sync", False)
    initial = models.tiny_mlp(16, 32, 10, seed=0).to(torch.float64)
    inputs = torch.randn(4 * N, 16, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    targets = torch.randint(0, 10, (4 * N,), generator=torch.Generator().manual_seed(2))
    reference = copy.deepcopy(initial)
    reference_optimizer = torch.optim.SGD(reference.parameters(), lr=0.1)
    # The ignores on .backward(): torch leaves Tensor.backward unannotated.
    for _ in range(2):
        reference_optimizer.zero_grad()
        F.cross_entropy(reference(inputs), targets).backward()  # type: ignore[no-untyped-call]
        reference_optimizer.step()
    results: dict[int, torch.Tensor] = {}

    def body(info: Any) -> None:
        model = DistributedDataParallel(copy.deepcopy(initial), **options)
        if hook == "allreduce":
            model.register_comm_hook(None, default_hooks.allreduce_hook)
        elif hook == "fp16":
            model.register_comm_hook(None, default_hooks.fp16_compress_hook)
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        mine = slice(4 * info.rank, 4 * info.rank + 4)
        for _ in range(2):
            optimizer.zero_grad()
            if no_sync:  # half the shard without synchronising, the other half synchronised
                with model.no_sync():
                    (F.cross_entropy(model(inputs[mine][:2]), targets[mine][:2]) / 2).backward()  # type: ignore[no-untyped-call]
                (F.cross_entropy(model(inputs[mine][2:]), targets[mine][2:]) / 2).backward()  # type: ignore[no-untyped-call]
            else:
                F.cross_entropy(model(inputs[mine]), targets[mine]).backward()  # type: ignore[no-untyped-call]
            optimizer.step()
        results[info.rank] = torch.cat([p.detach().reshape(-1) for p in model.parameters()])

    assert passed(simulate(body, N), N)
    expected = torch.cat([p.detach().reshape(-1) for p in reference.parameters()])
    tolerance = 1e-3 if hook == "fp16" else 1e-12
    assert all(torch.equal(results[r], results[0]) for r in range(N)), "ranks differ"
    assert torch.allclose(results[0], expected, rtol=tolerance, atol=tolerance)
