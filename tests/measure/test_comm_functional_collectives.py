"""The functional collectives (``torch.distributed._functional_collectives``, what DTensor calls) are counted
by :mod:`pytest_dmlbench.measure.comm` on a real one-rank gloo group; their bytes at 2 and 4 ranks are checked
against tensor parallelism's formula in ``bench_cases/test_sharded_equivalence.py``."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import torch
import torch.distributed as dist
import torch.distributed._functional_collectives as funcol
from torch.distributed.device_mesh import DeviceMesh

from pytest_dmlbench.measure import comm
from pytest_dmlbench.measure.comm import FUNCTIONAL_PAYLOAD, instrument_collectives

# The functions these tests call (torch 2.14.1 has them; the floor job's torch 2.3 lacks some).
pytestmark = pytest.mark.skipif(
    not all(hasattr(funcol, f) for f in ("all_gather_single_autograd", "reduce_scatter_single"))
    or not hasattr(DeviceMesh, "from_group"),
    reason=f"torch {torch.__version__} lacks the functional collectives or DeviceMesh.from_group used here",
)


def test_payload_of_each_functional_collective() -> None:
    t = torch.zeros(10)  # 40 bytes
    assert FUNCTIONAL_PAYLOAD["all_reduce"]({"self": t, "reduceOp": "sum"}) == 40
    assert FUNCTIONAL_PAYLOAD["all_gather_tensor"]({"self": t, "gather_dim": 0}) == 40
    assert FUNCTIONAL_PAYLOAD["reduce_scatter_tensor"]({"self": t, "reduceOp": "sum"}) == 40
    assert FUNCTIONAL_PAYLOAD["all_reduce_coalesced"]({"self": [t, t]}) == 80
    assert FUNCTIONAL_PAYLOAD["reduce_scatter_tensor_coalesced"]({"inputs": [t, t, t]}) == 120


def world_group() -> dist.ProcessGroup:
    group = dist.group.WORLD
    assert group is not None
    return group


def test_a_functional_all_reduce_is_counted_and_left_a_tensor(world1: None) -> None:
    plain = funcol.all_reduce
    with instrument_collectives() as counter:
        assert funcol.all_reduce is not plain
        result = funcol.all_reduce(torch.ones(4), "sum", world_group())
        assert isinstance(result, torch.Tensor)  # not wrapped like an asynchronous Work
        assert torch.equal(funcol.wait_tensor(result), torch.ones(4))  # type: ignore[no-untyped-call]  # untyped in torch
    assert funcol.all_reduce is plain
    assert counter.ops["all_reduce"].calls == 1
    assert counter.bytes == 0  # nothing leaves a one-rank group
    assert len(counter.intervals) == 1


def test_every_group_form_is_resolved(world1: None) -> None:
    mesh = DeviceMesh.from_group(world_group(), "cpu")
    groups: list[Any] = [world_group(), world_group().group_name, mesh, (mesh, 0)]
    with instrument_collectives() as counter:
        for group in groups:
            funcol.wait_tensor(funcol.all_reduce(torch.ones(2), "sum", group))  # type: ignore[no-untyped-call]  # untyped in torch
    assert counter.ops["all_reduce"].calls == len(groups)


def test_the_interceptor_sees_functional_collectives_under_their_names(world1: None) -> None:
    """``*_autograd`` variants are recorded under the plain name. (DTensor's own redistributions skip the
    collective on one rank; at 2 and 4 ranks they are counted in bench_cases/test_sharded_equivalence.py.)"""
    seen: list[tuple[str, int]] = []

    def record(op: str, size: int, call: Callable[[], Any]) -> Any:
        seen.append((op, size))
        return call()

    previous = comm.set_interceptor(record)
    try:
        with instrument_collectives() as counter:
            gathered = funcol.all_gather_single_autograd(torch.ones(3), 0, world_group())
            funcol.wait_tensor(funcol.reduce_scatter_single(torch.ones(4), "sum", 0, world_group()))  # type: ignore[no-untyped-call]  # untyped in torch
    finally:
        comm.set_interceptor(previous)
    assert torch.equal(funcol.wait_tensor(gathered), torch.ones(3))  # type: ignore[no-untyped-call]  # untyped in torch
    assert seen == [("all_gather_single", 0), ("reduce_scatter_single", 0)]
    assert sorted(counter.ops) == ["all_gather_single", "reduce_scatter_single"]


def test_negative_control_an_operator_called_below_the_functions_is_not_seen(world1: None) -> None:
    """The count is taken at the Python functions: the raw operator (as compiled graphs call it) is not."""
    with instrument_collectives() as counter:
        raw = torch.ops._c10d_functional.all_reduce(torch.ones(2), "sum", world_group().group_name)
        torch.ops._c10d_functional.wait_tensor(raw)
    assert counter.calls == 0
