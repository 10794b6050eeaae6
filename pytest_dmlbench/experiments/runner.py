"""The default experiment runner (``framework: dmlbench``), run on every rank like a case body.

Trains the zoo model with the experiment's strategy for ``epochs`` epochs of at most
``max_batches_per_epoch`` global batches (reshuffled each epoch, the same order on every rank), evaluates
the held-out accuracy, then times ``comm_rounds`` steps against the strategy's no-communication twin.
In a block of the paired gate (a :class:`~pytest_dmlbench.measure.rounds.BlockBudget` that does not ask for
the whole experiment) it trains one epoch of the block's rounds, after its warm-up steps, untimed, and times
the block's rounds of communication: the block's cost follows its budget like any case's. The outcome
checks then ask only for finite losses: the accuracy a truncated training reaches says nothing, and the
ordinary run checked it in full.

Every figure is agreed across ranks before it is recorded, so rank 0's copy is the world's:

- ``epoch_time_s``: per epoch, max over ranks (epochs start at a barrier); ``total_time_s``: their sum;
- ``step_time_s``: per training step, max over ranks (it also sizes the paired gate's blocks);
- ``cpu_time_s``: per training step, the CPU time the ranks spent on it, summed over ranks
  (:mod:`~pytest_dmlbench.measure.cpu_time`; not recorded where the platform cannot read it);
- ``throughput_samples_per_s``: per epoch, global samples actually trained on / epoch time;
- ``loss``: per epoch, the mean shard loss over steps and data-holding ranks;
- ``accuracy``: held-out samples classified correctly (pixels, for segmentation), summed over ranks;
- ``comm_bytes_per_step``: per step, bytes the strategy handed to communication, the mean over ranks (every
  rank's count where ranks count alike);
- ``exposed_comm_fraction`` (and ``comm_busy_fraction``): from :func:`measure.runner.benchmark_training`;
- ``peak_rss_mb`` (``peak_cuda_mb`` on CUDA): whole run, max over ranks.

No pytest import here: this runs in the rank processes.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from pytest_dmlbench.experiments.datasets import Splits, load_splits
from pytest_dmlbench.experiments.schema import Experiment
from pytest_dmlbench.measure.clock import now
from pytest_dmlbench.measure.cpu_time import CpuReader
from pytest_dmlbench.measure.rounds import BlockBudget, is_smoke

MB = 1e6


@dataclass
class EpochFigures:
    """One epoch, agreed across ranks."""

    time_s: float
    loss: float
    samples: int
    bytes_per_step: list[float]
    step_times: list[float]
    cpu_times: list[float]  # summed over ranks; empty where the platform cannot read CPU time


def _sum_over_ranks(values: list[float]) -> list[float]:
    import torch
    import torch.distributed as td

    tensor = torch.tensor(values, dtype=torch.float64)
    if td.is_initialized() and td.get_world_size() > 1:
        td.all_reduce(tensor, op=td.ReduceOp.SUM)
    return [float(v) for v in tensor.tolist()]


def _mean_over_ranks(values: list[float]) -> list[float]:
    """Each value's mean over ranks: a change on any rank moves it (a max hides one below the max)."""
    import torch.distributed as td

    size = td.get_world_size() if td.is_initialized() else 1
    return [total / size for total in _sum_over_ranks(values)]


def _shard_for(strategy: Any, inputs: Any, targets: Any) -> tuple[Any, Any]:
    """This rank's shard of a global batch (``None`` on a rank that takes no data, e.g. the ps server)."""
    from pytest_dmlbench.data import shard

    if strategy.data_rank is None:
        return None, None
    x, y = shard((inputs, targets), strategy.data_rank, strategy.data_world_size)
    return x, y


def budgeted(block: BlockBudget | None) -> BlockBudget | None:
    """The block whose budget the experiment follows; None where it runs in full."""
    return None if block is None or block.whole_experiment else block


SMOKE_SAMPLES_PER_RANK = 1
"""A smoke run's batch per data rank: one sample (every model of the zoo trains on it at the datasets' input
size; the ResNets' batch normalisation still sees a 4x4 feature map at 32x32)."""


def smoke_form(experiment: Experiment, data_ranks: int) -> Experiment:
    """``experiment`` in its smallest form for ``--dmlbench-smoke``: the same model, dataset and strategy (the
    same code path), one epoch of one global batch of :data:`SMOKE_SAMPLES_PER_RANK` per data rank, one
    held-out batch, at most one communication round."""
    return replace(experiment, batch_size=SMOKE_SAMPLES_PER_RANK * max(1, data_ranks), epochs=1,
                   max_batches_per_epoch=1, eval_batches=1, comm_rounds=min(experiment.comm_rounds, 1))


def train_epoch(strategy: Any, splits: Splits, experiment: Experiment, epoch: int,
                loss_fn: Callable[..., Any], block: BlockBudget | None = None) -> EpochFigures:
    """One epoch of training (in a block: ``block.warmup`` untimed steps, then ``block.rounds`` timed ones);
    every rank must call it with the same arguments."""
    import torch

    from pytest_dmlbench.measure.rounds import RankSync

    sync = RankSync()
    shuffle = torch.Generator().manual_seed(experiment.seed * 100_003 + epoch)  # the same order on every rank
    order = torch.randperm(len(splits.train_y), generator=shuffle)
    size = experiment.batch_size
    steps = min(experiment.max_batches_per_epoch, len(order) // size)
    if steps == 0:
        raise ValueError(f"experiment {experiment.name}: the training set holds {len(order)} samples, fewer than "
                         f"one global batch of {size}; lower batch_size")
    warmup = 0
    if block is not None:  # batches cycle when the block asks for more steps than an epoch holds
        warmup, steps = block.warmup, block.rounds
    for step in range(warmup):
        batch = order[(step % (len(order) // size)) * size:][:size]
        strategy.step(*_shard_for(strategy, splits.train_x[batch], splits.train_y[batch]), loss_fn)
    losses: list[float] = []
    sent: list[float] = []
    step_times: list[float] = []
    cpu_times: list[float] = []
    cpu = CpuReader.for_rank()
    samples = 0
    sync.barrier()
    start = now()
    for step in range(steps):
        offset = ((warmup + step) % (len(order) // size)) * size
        index = order[offset:offset + size]
        inputs, targets = _shard_for(strategy, splits.train_x[index], splits.train_y[index])
        step_start, cpu_start = now(), cpu.read()
        loss = strategy.step(inputs, targets, loss_fn)
        step_times.append(now() - step_start)
        cpu_times.append(cpu.read() - cpu_start)
        sent.append(float(strategy.comm_bytes_last_step))
        if targets is not None:
            losses.append(float(loss))
            samples += int(targets.shape[0])
    elapsed = now() - start
    agreed_time = sync.max([elapsed])[0]
    loss_sum, loss_count, global_samples = _sum_over_ranks([sum(losses), float(len(losses)), float(samples)])
    return EpochFigures(
        time_s=agreed_time,
        loss=loss_sum / loss_count if loss_count else float("nan"),
        samples=int(global_samples),
        bytes_per_step=_mean_over_ranks(sent) if sent else [],
        step_times=sync.max(step_times) if step_times else [],
        cpu_times=_sum_over_ranks(cpu_times) if cpu_times and cpu.readable else [],
    )


def evaluate(strategy: Any, splits: Splits, rank: int, world_size: int, chunk: int) -> float | None:
    """Held-out accuracy of the trained model; rank r scores samples r, r + world_size, ... (None: no data).
    A sharded strategy's model is gathered whole first (a collective, like the sum at the end)."""
    import torch
    from torch.nn.parallel import DistributedDataParallel

    if len(splits.eval_y) == 0:
        return None
    if hasattr(strategy, "unsharded_model"):
        model = strategy.unsharded_model()
    elif isinstance(strategy.model, DistributedDataParallel):
        model = strategy.model.module
    else:
        model = strategy.model
    was_training = model.training
    model.eval()
    inputs, targets = splits.eval_x[rank::world_size], splits.eval_y[rank::world_size]
    correct = 0
    with torch.no_grad():
        for begin in range(0, len(targets), chunk):
            x = inputs[begin:begin + chunk].to(strategy.device)
            y = targets[begin:begin + chunk].to(strategy.device)
            correct += int((model(x).argmax(dim=1) == y).sum())
    model.train(was_training)
    right, total = _sum_over_ranks([float(correct), float(targets.numel())])
    return right / total


def _phase_peaks(device: Any) -> list[float]:
    """[peak RSS MB, peak CUDA MB] of this rank since the case began (0 where unreadable)."""
    from pytest_dmlbench.measure.memory import case_peak_rss_bytes

    rss = case_peak_rss_bytes()
    cuda = 0.0
    if device is not None and str(device).startswith("cuda"):
        import torch

        cuda = torch.cuda.max_memory_allocated(device) / MB
    return [0.0 if rss is None else rss / MB, cuda]


def measure_communication(strategy: Any, splits: Splits, experiment: Experiment, device: Any,
                          loss_fn: Callable[..., Any], block: BlockBudget | None = None) -> Any:
    """Step vs no-communication twin on the first training batch, in ``comm_rounds`` paired rounds (in a
    block: the block's rounds). One warm-up round, in a block too: the training before it warmed the step's
    path, and the round warms the twin's (the block's own warm-up, of its training, would add a step and a
    twin, 8 % of a ResNet-50 block, for nothing)."""
    from pytest_dmlbench.measure.rounds import RoundPlan
    from pytest_dmlbench.measure.runner import benchmark_training

    size = experiment.batch_size
    batch = _shard_for(strategy, splits.train_x[:size], splits.train_y[:size])
    plan = RoundPlan(warmup=1, rounds=experiment.comm_rounds if block is None else block.rounds)
    return benchmark_training(strategy, [batch], global_batch_size=size, loss_fn=loss_fn, twin=strategy.twin(),
                              plan=plan, device=device)


def check_outcome(experiment: Experiment, losses: list[float], accuracy: float | None,
                  block: BlockBudget | None = None) -> None:
    """The experiment's own checks: finite losses, and ``min_accuracy`` when set (not in a budgeted block,
    whose training is cut short)."""
    for epoch, loss in enumerate(losses, start=1):
        if not math.isfinite(loss):
            raise AssertionError(f"experiment {experiment.name}: training loss is {loss} in epoch {epoch} "
                                 f"(lr {experiment.lr}): training diverged")
    if budgeted(block) is not None:
        return
    if experiment.min_accuracy is not None and accuracy is not None and accuracy < experiment.min_accuracy:
        raise AssertionError(
            f"experiment {experiment.name}: held-out accuracy {accuracy:.3f} < min_accuracy "
            f"{experiment.min_accuracy} after {experiment.epochs} epoch(s); epoch losses "
            f"{', '.join(f'{loss:.4f}' for loss in losses)}: the model did not learn"
        )


@dataclass
class Measured:
    """An experiment's figures (rank-agreed: every rank holds the same) and its benchmark notes."""

    figures: dict[str, list[float] | float]
    notes: list[str]

    @property
    def losses(self) -> list[float]:
        loss = self.figures["loss"]
        return loss if isinstance(loss, list) else [loss]

    @property
    def accuracy(self) -> float | None:
        accuracy = self.figures.get("accuracy")
        return None if accuracy is None or isinstance(accuracy, list) else accuracy


def measure_experiment(experiment: Experiment, rank: int, world_size: int, device: Any,
                       block: BlockBudget | None = None) -> Measured:
    """Train, evaluate and measure ``experiment`` in an initialised process group (collective: every rank
    calls it); in a block of the paired gate, on the block's budget (:func:`budgeted`). Shared by every
    framework whose ranks run this package's strategies."""
    import torch.nn.functional as F

    from pytest_dmlbench.measure.rounds import RankSync
    from pytest_dmlbench.strategies import build
    from pytest_dmlbench.training.models import build_model

    model = build_model(experiment.model, seed=experiment.seed)
    strategy = build(experiment.strategy, model, lr=experiment.lr, momentum=experiment.momentum,
                     **experiment.strategy_options)
    if is_smoke(block):  # the data follow the strategy's data ranks (the ps server takes none)
        experiment = smoke_form(experiment, strategy.data_world_size)
    splits = load_splits(experiment)
    block = budgeted(block)
    epoch_count = experiment.epochs if block is None else 1
    epochs = [train_epoch(strategy, splits, experiment, epoch, F.cross_entropy, block) for epoch in range(epoch_count)]
    accuracy = evaluate(strategy, splits, rank, world_size, experiment.batch_size)
    peaks = _phase_peaks(device)

    times = [e.time_s for e in epochs]
    figures: dict[str, list[float] | float] = {
        "total_time_s": sum(times),
        "epoch_time_s": times,
        "throughput_samples_per_s": [e.samples / e.time_s if e.time_s > 0 else math.nan for e in epochs],
        "loss": [e.loss for e in epochs],
        "comm_bytes_per_step": [b for e in epochs for b in e.bytes_per_step],
        "step_time_s": [t for e in epochs for t in e.step_times],
    }
    notes: list[str] = []
    cpu_times = [t for e in epochs for t in e.cpu_times]
    if cpu_times:
        figures["cpu_time_s"] = cpu_times
    elif (missing := CpuReader.for_rank().missing) is not None:
        notes.append(missing)
    if accuracy is not None:
        figures["accuracy"] = accuracy
    if experiment.comm_rounds:
        result = measure_communication(strategy, splits, experiment, device, F.cross_entropy, block)
        for name in ("exposed_comm_fraction", "comm_busy_fraction"):
            if name in result.metrics:
                figures[name] = list(result.metrics[name].samples)
        notes.extend(result.notes)
        peaks = [max(a, b) for a, b in zip(peaks, _phase_peaks(device), strict=True)]
    rss_mb, cuda_mb = RankSync().max(peaks)
    if rss_mb > 0:
        figures["peak_rss_mb"] = rss_mb
    if cuda_mb > 0:
        figures["peak_cuda_mb"] = cuda_mb
    return Measured(figures, notes)


def run_experiment(dist: Any, dmlbench: Any, *, experiment: Experiment) -> None:
    """Train, evaluate and measure ``experiment`` on this rank; figures go to ``dmlbench``."""
    measured = measure_experiment(experiment, dist.rank, dist.world_size, dist.device, dmlbench.block)
    for name, samples in measured.figures.items():
        dmlbench.record(name, samples)
    dmlbench.notes.extend(measured.notes)
    check_outcome(experiment, measured.losses, measured.accuracy, dmlbench.block)
