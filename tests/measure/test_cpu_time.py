"""CPU time per step: read on the rank's computing thread, summed over ranks, blind to waiting."""

from __future__ import annotations

import time

import pytest

from pytest_dmlbench.measure.clock import ManualClock, cpu_clock_missing, cpu_now, use_clock, use_cpu_clock
from pytest_dmlbench.measure.cpu_time import CpuReader
from pytest_dmlbench.measure.rounds import RankSync, RoundPlan, run_rounds
from pytest_dmlbench.measure.runner import benchmark_training, time_callable
from pytest_dmlbench.results.stats import median


def _spin(n: int) -> float:
    total = 0.0
    for i in range(n):
        total += i * 0.5
    return total


def test_each_round_records_the_cpu_time_of_its_step_beside_its_wall_time() -> None:
    wall, cpu = ManualClock(), ManualClock()

    def step() -> None:
        wall.advance(0.010)
        cpu.advance(0.004)  # the rest of the step waited

    with use_clock(wall), use_cpu_clock(cpu):
        timed = time_callable(step, plan=RoundPlan(warmup=1, rounds=3), iterations=2)
    assert timed.samples == pytest.approx([0.010] * 3)
    assert timed.cpu_samples == pytest.approx([0.004] * 3)
    metrics = timed.metrics()
    assert metrics["cpu_time_s"].unit == "s" and metrics["cpu_time_s"].better == "lower"


def test_a_training_step_records_the_cpu_time_of_the_step_and_not_of_its_twin() -> None:
    wall, cpu = ManualClock(), ManualClock()

    def step(inputs: float, targets: float, loss_fn: object) -> float:
        wall.advance(0.010)
        cpu.advance(0.006)
        return 1.0

    def twin(inputs: float, targets: float, loss_fn: object) -> float:
        wall.advance(0.008)
        cpu.advance(0.5)  # a twin's CPU time never enters the step's figure
        return 1.0

    with use_clock(wall), use_cpu_clock(cpu):
        result = benchmark_training(step, [(1.0, 2.0)], global_batch_size=8, loss_fn=lambda x, y: x, twin=twin,
                                    plan=RoundPlan(warmup=1, rounds=4))
    assert result.metrics["cpu_time_s"].samples == pytest.approx([0.006] * 4)


def test_a_sleep_is_seen_by_wall_time_and_not_by_cpu_time() -> None:
    """The docs' "what CPU time cannot see", shown on the real clocks: a step that only waits."""
    timed = time_callable(time.sleep, (0.02,), plan=RoundPlan(warmup=1, rounds=5))
    assert median(timed.samples) >= 0.02
    assert median(timed.cpu_samples) < 0.25 * median(timed.samples)


def test_twice_the_work_reads_about_twice_the_cpu_time() -> None:
    """Large effect on the real clocks: CPU time counts work. The two are measured in pairs, side by side, so a
    slow phase of the machine (a lower clock, a busy sibling thread) falls on both of a pair alike."""
    ratios = []
    for _ in range(15):
        once = time_callable(_spin, (100_000,), plan=RoundPlan(warmup=0, rounds=1))
        twice = time_callable(_spin, (200_000,), plan=RoundPlan(warmup=0, rounds=1))
        ratios.append(twice.cpu_samples[0] / once.cpu_samples[0])
    assert 1.5 < median(ratios) < 2.7, ratios


def test_a_platform_that_cannot_read_thread_cpu_time_records_no_cpu_figure_and_says_so() -> None:
    def unreadable() -> float:
        raise OSError("CLOCK_THREAD_CPUTIME_ID not supported")

    with use_cpu_clock(unreadable):
        assert "cannot read a thread's CPU time" in str(cpu_clock_missing())
        timed = time_callable(lambda: None, plan=RoundPlan(warmup=0, rounds=2))
        result = benchmark_training(lambda x, y, f: 0.0, [(1.0, 2.0)], global_batch_size=1, loss_fn=lambda x, y: x,
                                    plan=RoundPlan(warmup=0, rounds=2))
    assert "cpu_time_s" not in timed.metrics() and "OSError" in timed.notes[0]
    assert "cpu_time_s" not in result.metrics and any("CPU time" in n for n in result.notes)


def test_the_reader_counts_the_thread_with_one_intra_op_thread_and_the_process_with_a_pool() -> None:
    import torch

    before = torch.get_num_threads()
    try:
        torch.set_num_threads(1)
        assert not CpuReader.for_rank().whole_process
        torch.set_num_threads(2)
        assert CpuReader.for_rank().whole_process
    finally:
        torch.set_num_threads(before)
    assert cpu_now(whole_process=True) >= cpu_now()  # the process's CPU time includes this thread's


class _TwoRanks(RankSync):
    """Rank ``rank`` of a two-rank world whose exchange is the MAX another rank's values would give."""

    def __init__(self, rank: int, other: list[float]) -> None:
        self.rank, self.world_size, self.distributed, self.group = rank, 2, True, None
        self.other = other

    def exchange(self, flag: float, values: list[float]) -> tuple[bool, list[float]]:  # type: ignore[override]
        self.other.extend([0.0] * (len(values) - len(self.other)))
        return flag > 0, [max(a, b) for a, b in zip(values, self.other, strict=True)]


def test_summed_values_add_every_rank_s_own_while_the_others_take_the_max() -> None:
    # rank 0 of two; rank 1 sent wall 0.5 and CPU 0.3 (in its own slot: index 1 + its rank)
    other = [0.5, 0.0, 0.3]
    rows = run_rounds(lambda: (0.2, 0.1), RoundPlan(warmup=0, rounds=1), width=2, sync=_TwoRanks(0, other),
                      summed=1)
    assert rows == [[0.5, pytest.approx(0.4)]]


def test_a_bad_summed_count_is_named() -> None:
    with pytest.raises(ValueError, match="summed must be between 0 and width"):
        run_rounds(lambda: (0.1,), RoundPlan(rounds=1), width=1, summed=2)
