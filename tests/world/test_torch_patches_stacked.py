"""Every patch the plugin puts on torch, stacked in the order a rank installs them and taken off again: torch's
modules and ``ProcessGroup`` end exactly as they began (measure/torch_patches.py)."""

from __future__ import annotations

import importlib
from collections.abc import Iterator
from typing import Any

import pytest
import torch.distributed as dist
import torch.distributed._functional_collectives as funcol
import torch.distributed.device_mesh as device_mesh
import torch.distributed.distributed_c10d as c10d
from torch._C._distributed_c10d import ProcessGroup

from pytest_dmlbench.measure import comm, torch_patches
from pytest_dmlbench.world import adopt_group
from pytest_dmlbench.world.bound_store import bind_rendezvous_stores
from pytest_dmlbench.world.groups import install_p2p_accounting, uninstall_p2p_accounting
from pytest_dmlbench.world.simulated.thread_world import per_thread_world

RENDEZVOUS: Any = importlib.import_module("torch.distributed.rendezvous")  # not torch.distributed's function
OWNERS = {"torch.distributed": dist, "distributed_c10d": c10d, "_functional_collectives": funcol,
          "rendezvous": RENDEZVOUS, "device_mesh": device_mesh, "ProcessGroup": ProcessGroup}
INSTALLERS = {"pytest_dmlbench.world.bound_store.bind_rendezvous_stores", "pytest_dmlbench.world.adopt_group.install",
              "pytest_dmlbench.world.groups.install_p2p_accounting",
              "pytest_dmlbench.world.simulated.thread_world.per_thread_world",
              "pytest_dmlbench.measure.comm.instrument_collectives"}


@pytest.fixture
def bare_torch() -> Iterator[None]:
    """Nothing patched during the test: what earlier tests in this process left on for good (the simulated
    world installs the adopting ``init_process_group`` for the life of the process) is lifted, and put back
    after the test."""
    lifted = [patch for patch in torch_patches.installed() if patch.in_place()]
    torch_patches.restore_all(lifted)
    yield
    for patch in lifted:
        torch_patches.install(patch.owner, patch.name, patch.patched, by=patch.installer)


def _attributes() -> dict[str, dict[str, Any]]:
    return {label: dict(vars(owner)) for label, owner in OWNERS.items()}


def _differences(before: dict[str, dict[str, Any]], after: dict[str, dict[str, Any]]) -> list[str]:
    """Each attribute not the very object it was (added, removed or replaced), as ``owner.name``."""
    found: list[str] = []
    for label, attributes in before.items():
        now = after[label]
        found.extend(f"{label}.{name}" for name in sorted(attributes.keys() | now.keys())
                     if attributes.get(name, KeyError) is not now.get(name, KeyError))
    return found


def _installers(mark: int) -> set[str]:
    return {patch.installer for patch in torch_patches.installed()[mark:]}


def test_every_patch_stacked_in_the_order_a_rank_installs_them_comes_off_to_the_originals(bare_torch: None) -> None:
    before = _attributes()
    mark = len(torch_patches.installed())
    bind_rendezvous_stores()  # a Ray worker's setup hook, first of all
    adopt_group.install()  # the zygote's warm-up (or a rank's first case)
    install_p2p_accounting()  # a rank joining its group
    # a simulated case, and a strategy's step inside it
    with per_thread_world(), comm.instrument_collectives():
        on = torch_patches.installed()[mark:]
        assert _installers(mark) == INSTALLERS
        changed = _differences(before, _attributes())  # negative control: the comparison sees every patch
        assert {"rendezvous._create_c10d_store", "torch.distributed.init_process_group",
                "distributed_c10d.destroy_process_group", "ProcessGroup.send", "ProcessGroup.recv_anysource",
                "distributed_c10d._world", "torch.distributed.all_reduce",
                "_functional_collectives.all_reduce"} <= set(changed)
        watched = [patch for patch in on if any(patch.owner is owner for owner in OWNERS.values())]
        assert len(changed) == len(watched)  # (a module that imported init_process_group by name: not watched)
    assert _installers(mark) == INSTALLERS - {"pytest_dmlbench.measure.comm.instrument_collectives",
                                              "pytest_dmlbench.world.simulated.thread_world.per_thread_world"}
    uninstall_p2p_accounting()
    # the rendezvous hook and the adopting functions last a process's life: taken off here through the registry
    assert _installers(mark) == {"pytest_dmlbench.world.bound_store.bind_rendezvous_stores",
                                 "pytest_dmlbench.world.adopt_group.install"}
    torch_patches.restore_all(torch_patches.installed()[mark:])
    assert torch_patches.installed()[mark:] == ()
    assert _differences(before, _attributes()) == []
