"""Strict mode finds what NCCL would hang on or corrupt: each detection beside its negative control (the same
code made correct passes; the buggy code passes without strict mode, as on gloo), reports read for the rank,
the call and the stack. The bugs of ``strict_cases.py`` run at 2 and at 1024 ranks."""

from __future__ import annotations

from typing import Any

import pytest
import torch
import torch.distributed as dist

from pytest_dmlbench.world.failure import failure_text
from pytest_dmlbench.world.outcome import CaseOutcome
from tests.world.simulated import strict_cases
from tests.world.simulated.helpers import passed, simulate


def report(run: CaseOutcome, world_size: int) -> str:
    assert not run.passed, "the case passed where strict mode should have failed it"
    return failure_text(run, world_size, "simulated")


# -- asynchronous collectives: poison until wait(), reads and writes before wait() --------------------------
def _async_all_reduce(*, read_before_wait: bool) -> Any:
    def body(info: Any) -> None:
        tensor = torch.full((4,), float(dist.get_rank() + 1))
        work = dist.all_reduce(tensor, async_op=True)
        if read_before_wait:
            print(float(tensor.sum()))  # the race: the result is not there yet on NCCL
        work.wait()
        size = dist.get_world_size()
        assert torch.equal(tensor, torch.full((4,), size * (size + 1) / 2)), tensor
    return body


def test_a_read_of_an_async_collective_output_before_wait_names_the_rank_the_call_and_the_line() -> None:
    text = report(simulate(_async_all_reduce(read_before_wait=True), 4, strict=True), 4)
    assert "PendingTensorAccess: strict mode: rank 0 read a tensor (float32[4]) in TensorBase.sum before wait() " \
           "on all_reduce(SUM, float32[4]) #1 on the default group (issued at " in text
    assert "test_strict_mode.py" in text and "print(float(tensor.sum()))" in text  # the rank's stack, to the line
    assert "[ranks 0, 1, 2, 3] failed alike" in text


def test_negative_controls_of_the_read_the_correct_code_passes_and_without_strict_mode_the_race_passes() -> None:
    assert passed(simulate(_async_all_reduce(read_before_wait=False), 4, strict=True), 4)
    assert passed(simulate(_async_all_reduce(read_before_wait=True), 4), 4)


def test_an_access_the_case_catches_still_fails_the_rank() -> None:
    def body(info: Any) -> None:
        tensor = torch.ones(2)
        work = dist.all_reduce(tensor, async_op=True)
        try:
            tensor.add_(1)
        except Exception:  # a broad handler in the case must not hide the race
            pass
        work.wait()

    text = report(simulate(body, 2, strict=True), 2)
    assert "rank 0 wrote a tensor (float32[2]) in TensorBase.add_ before wait() on all_reduce(SUM, float32[2]) #1" \
           in text and "(raised on this rank and caught by the case)" in text


def test_an_async_output_holds_poison_until_wait_and_its_value_after() -> None:
    seen: dict[int, tuple[torch.Tensor, torch.Tensor]] = {}

    def body(info: Any) -> None:
        tensor, count = torch.ones(3), torch.ones(2, dtype=torch.int64)
        works = [dist.all_reduce(tensor, async_op=True), dist.all_reduce(count, async_op=True)]
        with torch._C.DisableTorchFunction():  # look without the watch: what the buffers hold
            before = (tensor.clone(), count.clone())
        for work in works:
            work.wait()
        seen[dist.get_rank()] = before
        assert tensor.tolist() == [2.0] * 3 and count.tolist() == [2, 2]

    assert passed(simulate(body, 2, strict=True), 2)
    for before_float, before_int in seen.values():
        assert before_float.isnan().all() and (before_int == torch.iinfo(torch.int64).min).all()
    seen.clear()
    assert passed(simulate(body, 2), 2)  # without strict mode the values are there at the call
    assert all(torch.equal(f, torch.full((3,), 2.0)) for f, _ in seen.values())


def test_a_later_collective_on_the_group_completes_earlier_async_work() -> None:
    """As on one NCCL stream: a synchronous collective after an async one makes the async result readable."""
    def body(info: Any) -> None:
        first, second = torch.ones(2), torch.ones(2)
        work = dist.all_reduce(first, async_op=True)
        dist.all_reduce(second)
        assert first.tolist() == [2.0, 2.0]  # no wait(), but the later call on the group implies it
        work.wait()

    assert passed(simulate(body, 2, strict=True), 2)


def test_an_async_output_handed_to_the_next_collective_gets_its_value_first() -> None:
    def body(info: Any) -> None:
        tensor = torch.ones(2)
        first = dist.all_reduce(tensor, async_op=True)
        second = dist.all_reduce(tensor, async_op=True)  # stream order on NCCL: sums the first's result
        second.wait()
        first.wait()
        assert tensor.tolist() == [4.0, 4.0], tensor

    assert passed(simulate(body, 2, strict=True), 2)


def test_a_read_of_an_irecv_buffer_before_wait_is_found_and_a_read_of_an_isend_buffer_is_allowed() -> None:
    def body(info: Any, *, read_received: bool) -> None:
        rank = dist.get_rank()
        tensor = torch.full((2,), float(rank))
        work = dist.isend(tensor, 1) if rank == 0 else dist.irecv(tensor, 0)
        assert work is not None  # None only for a rank outside the group
        if rank == 0 or read_received:
            float(tensor.sum())  # reading a send's buffer is fine on NCCL; a receive's is not
        work.wait()
        assert tensor.tolist() == [0.0, 0.0]

    text = report(simulate(lambda info: body(info, read_received=True), 2, strict=True), 2)
    assert "rank 1 read a tensor (float32[2]) in TensorBase.sum before wait() on recv from rank 0 (tag 0, " \
           "float32[2]) on the default group" in text
    assert passed(simulate(lambda info: body(info, read_received=False), 2, strict=True), 2)


# -- the bugs gloo passes, at 2 and 1024 ranks ---------------------------------------------------------------
# 1024 ranks: each check starts two worlds of 1024 threads (seconds each): the daily slow run; 2 ranks every run
WORLDS = [2, pytest.param(1024, id="1024", marks=pytest.mark.slow)]


@pytest.mark.parametrize("world_size", WORLDS)
def test_a_tensor_changed_after_isend_before_wait_is_found(world_size: int) -> None:
    text = report(simulate(lambda info: strict_cases.race_after_isend(info.rank, world_size), world_size,
                           strict=True), world_size)
    assert "PendingTensorAccess: strict mode: rank 0 wrote a tensor (float32[4]) in TensorBase.add_ before wait() " \
           "on send to rank 1 (tag 0, float32[4]) on the default group (issued at " in text
    assert "strict_cases.py" in text and "tensor.add_(100.0)" in text
    assert passed(simulate(lambda info: strict_cases.race_after_isend(info.rank, world_size, correct=True),
                           world_size, strict=True), world_size)


@pytest.mark.parametrize("world_size", WORLDS)
def test_a_send_send_deadlock_is_reported_at_once_naming_every_rank_of_the_cycle(world_size: int) -> None:
    text = report(simulate(lambda info: strict_cases.send_send(info.rank, world_size), world_size, strict=True),
                  world_size)
    assert f"strict mode: deadlock, a cycle of {world_size} ranks each blocked in a point-to-point call" in text
    if world_size == 2:
        assert "(1 -> 0 -> 1): rank 1: send to rank 0 (tag 0, float32[4]); rank 0: send to rank 1 (tag 0, " \
               "float32[4])" in text
    else:
        assert f"ranks 0-{world_size - 1} (r): send to rank r+1 mod {world_size} (tag 0, float32[4])" in text
    assert passed(simulate(lambda info: strict_cases.send_send(info.rank, world_size, correct=True), world_size,
                           strict=True), world_size)


@pytest.mark.parametrize("world_size", WORLDS)
def test_a_pipeline_taking_micro_batches_in_the_wrong_order_is_found(world_size: int) -> None:
    last = world_size - 1
    text = report(simulate(lambda info: strict_cases.pipeline_order(info.rank, world_size), world_size,
                           strict=True), world_size)
    assert f"strict mode: deadlock, a cycle of 2 ranks each blocked in a point-to-point call that only the next " \
           f"can match ({last} -> {last - 1} -> {last}): rank {last}: recv from rank {last - 1} (tag 1, float32[4]); " \
           f"rank {last - 1}: send to rank {last} (tag 0, float32[4])" in text
    assert passed(simulate(lambda info: strict_cases.pipeline_order(info.rank, world_size, correct=True),
                           world_size, strict=True), world_size)


def test_without_strict_mode_the_three_bugs_pass_as_on_gloo() -> None:
    """The negative control of the detections: buffered sends and finished async work let every bug through."""
    for bug in strict_cases.BUGS.values():
        assert passed(simulate(lambda info, bug=bug: bug(info.rank, 4), 4), 4)


# -- matching: full shapes of many tensors, the source of a receive from any rank ----------------------------
def test_a_call_of_many_tensors_is_matched_shape_by_shape() -> None:
    def body(info: Any, *, same: bool) -> None:
        shapes = [(2,), (3,), (4,), (5,), (6, 2)] if same or dist.get_rank() == 0 else [(2,), (3,), (4,), (6,), (11,)]
        dist.all_reduce_coalesced([torch.ones(s) for s in shapes])

    text = report(simulate(lambda info: body(info, same=False), 2, strict=True), 2)
    assert "rank 1 called all_reduce(SUM, 5 tensors of 26 elements (float32)) as collective #1 of the default " \
           "group, where rank 0 called all_reduce(SUM, 5 tensors of 26 elements (float32)) (strict mode: tensor 3 " \
           "is float32[6] where it gave float32[5])" in text
    assert passed(simulate(lambda info: body(info, same=True), 2, strict=True), 2)


def test_a_receive_from_any_rank_returns_each_sender_in_the_order_they_sent() -> None:
    def body(info: Any) -> None:
        rank, size = dist.get_rank(), dist.get_world_size()
        if rank == 0:
            got = torch.zeros(1)
            sources = []
            for _ in range(size - 1):
                sources.append(dist.recv(got))
                assert got.item() == sources[-1]  # the data came from the rank it names
            assert sorted(sources) == list(range(1, size)), sources
        else:
            dist.send(torch.full((1,), float(rank)), 0)

    assert passed(simulate(body, 4, strict=True), 4)


def test_a_pending_tensor_covers_the_bytes_of_its_elements_contiguous_or_strided() -> None:
    """The watch's byte ranges: a contiguous tensor's by its size, a strided view's up to its last element
    (``base[::2]`` reaches element 6, not only the first 4 elements' 16 bytes)."""
    from pytest_dmlbench.world.simulated.pending import PendingWork, _extent

    base = torch.zeros(8)
    strided, contiguous = base[::2], base[2:4]
    on_strided, on_contiguous = PendingWork("a", "", [strided], []), PendingWork("b", "", [contiguous], [])
    assert on_strided.overlaps(_extent(base[6:7]), written=False) is strided  # type: ignore[arg-type]
    assert on_strided.overlaps(_extent(base[7:8]), written=False) is None  # type: ignore[arg-type]
    assert on_contiguous.overlaps(_extent(base[3:4]), written=False) is contiguous  # type: ignore[arg-type]
    assert on_contiguous.overlaps(_extent(base[4:5]), written=False) is None  # type: ignore[arg-type]
    assert _extent(base[3:5]) == (base.data_ptr() + 12, base.data_ptr() + 20)


def test_a_blocking_collective_is_not_staged_and_one_without_options_is_taken_as_asynchronous() -> None:
    """A call with ``asyncOp`` False (``async_op=False``) is waited for at once: its result is in the tensor at
    return, with nothing staged or watched. A call without options (as from C++: DDP's reducer) stays pending,
    its output poison until ``wait()``."""
    seen: dict[int, tuple[list[float], bool]] = {}

    def body(info: Any) -> None:
        group = dist.distributed_c10d._get_default_group()
        blocking, unknown = torch.ones(2), torch.ones(2)
        options = dist.AllreduceOptions()
        options.asyncOp = False
        group.allreduce([blocking], options)
        work = group.allreduce([unknown])
        with torch._C.DisableTorchFunction():  # look without the watch
            seen[dist.get_rank()] = (blocking.tolist(), bool(unknown.isnan().all()))
        work.wait()
        assert unknown.tolist() == [2.0, 2.0]

    assert passed(simulate(body, 2, strict=True), 2)
    assert seen == {0: ([2.0, 2.0], True), 1: ([2.0, 2.0], True)}
