"""Throughput of ``ddp`` and ``bucketed`` side by side on ResNet-18 (CIFAR stem) at world size 2.

A plain measurement by timing ``step()``: the two strategies alternate step by step, swapping which goes
first every round (so machine noise and order effects hit both alike); every timed step starts at a
barrier; a step's time is the maximum over ranks (all-reduced, so every rank holds the same figures and
the same counts); the median over the timed steps after warm-up gives the throughput. Nothing about wall
time is asserted; the figures are printed.
"""

from __future__ import annotations

import statistics
import time
from typing import Any

import pytest
import torch
import torch.distributed as tdist
import torch.nn.functional as F

from pytest_dmlbench.data import shard, synthetic_images
from pytest_dmlbench.measure.rounds import smoke_or
from pytest_dmlbench.strategies import Strategy, build
from pytest_dmlbench.training import models

PER_RANK_BATCH = 16
WARMUP_STEPS = 2
TIMED_STEPS = 8


def timed_step(strategy: Strategy, inputs: torch.Tensor, targets: torch.Tensor) -> float:
    """Seconds of one step, the slowest rank's (identical on every rank)."""
    tdist.barrier()
    begin = time.perf_counter()
    strategy.step(inputs, targets, F.cross_entropy)
    elapsed = torch.tensor([time.perf_counter() - begin], dtype=torch.float64, device=strategy.device)
    tdist.all_reduce(elapsed, op=tdist.ReduceOp.MAX)
    return float(elapsed)


def measure_throughput(
    names: tuple[str, ...] = ("ddp", "bucketed"),
    *,
    per_rank_batch: int = PER_RANK_BATCH,
    warmup: int = WARMUP_STEPS,
    steps: int = TIMED_STEPS,
) -> dict[str, Any]:
    """Median step time and samples/s of each strategy, interleaved step by step, plus ``bucketed/ddp``."""
    rank, world = tdist.get_rank(), tdist.get_world_size()
    strategies = {name: build(name, models.resnet18(seed=0), lr=0.01, momentum=0.9) for name in names}
    images, labels = synthetic_images(per_rank_batch * world, seed=0)
    inputs, targets = shard((images, labels), rank, world)
    times: dict[str, list[float]] = {name: [] for name in names}
    samples_per_step = per_rank_batch * world
    for step in range(warmup + steps):
        order = list(strategies.items()) if step % 2 == 0 else list(strategies.items())[::-1]
        for name, strategy in order:  # alternate which strategy goes first
            seconds = timed_step(strategy, inputs, targets)
            if step >= warmup:
                times[name].append(seconds)
    result: dict[str, Any] = {"world_size": world, "global_batch": samples_per_step, "steps": steps}
    for name, samples in times.items():
        median = statistics.median(samples)
        result[name] = {
            "median_step_s": median,
            "samples_per_s": samples_per_step / median,
            "step_times_s": samples,
        }
    if "ddp" in result and "bucketed" in result:
        result["bucketed_over_ddp"] = result["bucketed"]["samples_per_s"] / result["ddp"]["samples_per_s"]
        paired = [d / b for d, b in zip(times["ddp"], times["bucketed"], strict=True)]
        result["bucketed_over_ddp_paired_median"] = statistics.median(paired)
    return result


@pytest.mark.dmlbench(world_size=2, timeout=900)
def test_bucketed_vs_ddp_throughput_resnet18(dist: Any, dmlbench: Any) -> None:
    block = dmlbench.block  # a smoke run: one sample a rank, one timed step, no warm-up; the same strategies
    result = measure_throughput(per_rank_batch=smoke_or(block, PER_RANK_BATCH), warmup=smoke_or(block, WARMUP_STEPS, 0),
                                steps=smoke_or(block, TIMED_STEPS))
    global_batch = result["global_batch"]
    for name in ("ddp", "bucketed"):
        samples = [global_batch / t for t in result[name]["step_times_s"]]
        dmlbench.record(f"{name}_samples_per_s", samples, unit="samples/s", better="higher")
    dmlbench.record("bucketed_over_ddp", result["bucketed_over_ddp"], unit="x", better="higher")
    if dist.is_main:
        for name in ("ddp", "bucketed"):
            figures = result[name]
            print(f"{name}: {figures['samples_per_s']:.1f} samples/s (median step {figures['median_step_s']:.3f} s)")
        print(
            f"bucketed / ddp throughput: {result['bucketed_over_ddp']:.3f} (ratio of medians), "
            f"{result['bucketed_over_ddp_paired_median']:.3f} (median of step-by-step ratios)"
        )
