"""Collective instrumentation on a real one-rank gloo group (byte counting at two ranks is validated in
``bench_cases/test_measurement_validation.py``)."""

from __future__ import annotations

import threading
import time

import pytest
import torch
import torch.distributed as dist

from pytest_dmlbench.measure.clock import ManualClock, use_clock
from pytest_dmlbench.measure.comm import (
    PAYLOAD,
    CommCounter,
    _TimedWork,
    instrument_collectives,
    original,
    union_length,
)


def test_payload_of_each_collective() -> None:
    t = torch.zeros(10)  # 40 bytes
    assert PAYLOAD["all_reduce"]({"tensor": t}) == 40
    assert PAYLOAD["all_gather"]({"tensor_list": [t, t], "tensor": t}) == 40
    assert PAYLOAD["reduce_scatter"]({"output": t, "input_list": [t, t, t]}) == 120
    assert PAYLOAD["all_to_all"]({"output_tensor_list": [t], "input_tensor_list": [t, t]}) == 80
    assert PAYLOAD["all_gather_into_tensor"]({"output_tensor": torch.zeros(99), "input_tensor": t}) == 40
    assert PAYLOAD["barrier"]({}) == 0
    assert PAYLOAD["send"]({"tensor": torch.zeros(3, dtype=torch.float64)}) == 24


@pytest.mark.parametrize(
    ("intervals", "length"),
    [
        ([], 0.0),
        ([(0.0, 1.0)], 1.0),
        ([(0.0, 1.0), (0.5, 2.0)], 2.0),
        ([(0.0, 1.0), (2.0, 3.0)], 2.0),
        ([(0.0, 5.0), (1.0, 2.0), (3.0, 4.0)], 5.0),
    ],
    ids=["empty", "one", "overlap", "disjoint", "nested"],
)
def test_union_length_counts_overlaps_once(intervals: list[tuple[float, float]], length: float) -> None:
    assert union_length(intervals) == pytest.approx(length)


def test_instrumentation_is_removed_on_exit_even_when_nested(world1: None) -> None:
    plain = dist.all_reduce
    with instrument_collectives() as outer:
        assert dist.all_reduce is not plain
        assert original("all_reduce") is plain
        with instrument_collectives() as inner:
            dist.all_reduce(torch.ones(4))
        dist.all_reduce(torch.ones(4))
        assert dist.all_reduce is not plain
    assert dist.all_reduce is plain
    assert dist.distributed_c10d.all_reduce is plain
    assert (outer.calls, inner.calls) == (2, 1)


def test_one_rank_world_counts_calls_and_time_but_no_bytes(world1: None) -> None:
    with instrument_collectives() as comm:
        dist.all_reduce(torch.ones(1000))
        dist.broadcast(torch.ones(10), src=0)
        dist.barrier()
    assert comm.calls == 3
    assert comm.bytes == 0  # nothing leaves a one-rank group
    assert comm.busy_s > 0 and comm.blocked_s > 0


def test_collective_implemented_through_another_is_counted_once(world1: None) -> None:
    # all_gather_into_tensor forwards to all_gather_single in this torch; both are instrumented
    with instrument_collectives() as comm:
        dist.all_gather_into_tensor(torch.zeros(4), torch.ones(4))
    assert comm.calls == 1
    assert list(comm.ops) == ["all_gather_into_tensor"]


def test_async_work_is_timed_until_wait_returns(world1: None) -> None:
    fake = ManualClock()
    with use_clock(fake), instrument_collectives() as comm:
        work = dist.all_reduce(torch.ones(4), async_op=True)
        assert work is not None
        fake.advance(0.5)  # compute overlapping the collective
        work.wait()
    assert comm.intervals == [(0.0, 0.5)]
    assert comm.busy_s == pytest.approx(0.5)
    assert comm.blocked_s == pytest.approx(0.0)


def test_async_work_through_its_future_is_timed(world1: None) -> None:
    with instrument_collectives() as comm:
        work = dist.all_reduce(torch.ones(4), async_op=True)
        assert work is not None
        work.get_future().wait()
    assert len(comm.intervals) == 1


class _SlowCounter(CommCounter):
    """Takes its time to record an interval, so a record made after ``wait()`` returned is caught."""

    def record_interval(self, start: float, end: float) -> None:
        time.sleep(0.3)
        super().record_interval(start, end)


class _WorkCompletedByAnotherThread:
    """Stands in for a backend's ``Work``: its real torch future is completed from another thread, as
    gloo's worker thread does (the real backend completes too quickly to hit the window reliably)."""

    def __init__(self) -> None:
        self.future: torch.futures.Future[list[torch.Tensor]] = torch.futures.Future()

    def get_future(self) -> torch.futures.Future[list[torch.Tensor]]:
        return self.future

    def complete_soon(self) -> threading.Thread:
        def complete() -> None:
            time.sleep(0.05)
            self.future.set_result([torch.ones(1)])

        thread = threading.Thread(target=complete)
        thread.start()
        return thread


def test_future_wait_returns_only_after_the_interval_is_recorded() -> None:
    # Negative control: with a plain done-callback on the backend's future, this wait() returns while the
    # completing thread is still inside record_interval and the interval is missing.
    counter = _SlowCounter()
    work = _WorkCompletedByAnotherThread()
    timed = _TimedWork(work, "all_reduce", 0.0, [counter])
    future = timed.get_future()
    thread = work.complete_soon()
    value = future.wait()
    assert len(counter.intervals) == 1
    assert torch.equal(value[0], torch.ones(1))  # the chained future still carries the result
    thread.join()


def test_counter_without_instrumentation_sees_nothing(world1: None) -> None:
    counter = CommCounter()
    dist.all_reduce(torch.ones(4))
    assert counter.calls == 0
    with instrument_collectives(counter):
        pass
    counter.record_call("all_reduce", 8, 0.1)
    counter.reset()
    assert counter.calls == 0 and counter.busy_s == 0.0
