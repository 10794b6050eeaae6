"""The world pool's policy for block servers: only the world in use stays alive."""

from __future__ import annotations

import os

import pytest

from pytest_dmlbench.world.forked.pool import WorldPool


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    with open(f"/proc/{pid}/stat") as stat:
        return stat.read().split()[2] != "Z"


@pytest.mark.parametrize("one_at_a_time", [True, False])  # False: the session's policy, the negative control
def test_a_block_server_keeps_only_the_world_it_uses(one_at_a_time: bool) -> None:
    pool = WorldPool(dict, lambda ws: 1)
    pool.one_world_at_a_time = one_at_a_time
    try:
        first = pool.world("gloo", 1)
        first_pids = list(first.pids)
        second = pool.world("gloo", 2)
        assert all(_alive(pid) for pid in second.pids)
        assert all(_alive(pid) for pid in first_pids) is not one_at_a_time, first_pids
        again = pool.world("gloo", 1)  # restarted when it was stopped, the same world when it was kept
        assert (again is first) is not one_at_a_time
    finally:
        pool.close()
