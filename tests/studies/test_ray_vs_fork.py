"""``studies/ray_vs_fork.py``: its dispatch timing on a real forked world (a failing case stops it), and the
whole comparison with Ray daily (a Ray instance costs more CPU than every CI run can give it)."""

from __future__ import annotations

import pytest

from pytest_dmlbench.world.forked.pool import WorldPool
from pytest_dmlbench.world.registry import CaseEntry, CaseRegistry
from studies import ray_vs_fork
from tests.studies.running import run_study


def failing(dist: object) -> None:
    raise AssertionError("wrong on purpose")


def test_dispatch_is_timed_on_a_forked_world_and_a_failing_case_stops_the_study() -> None:
    registry: CaseRegistry = {**ray_vs_fork.REGISTRY, "failing": CaseEntry(failing, ("dist",), {})}
    pool = WorldPool(lambda: registry, lambda n: 1)
    try:
        world = pool.world("gloo", 2)
        assert 0.0 < ray_vs_fork.median_dispatch_s(world, 3) < 60.0
        with pytest.raises(SystemExit, match="the failing case failed"):
            ray_vs_fork.median_dispatch_s(world, 1, case="failing")
        world.kill()
    finally:
        pool.close()


@pytest.mark.slow
def test_one_world_of_each_engine(capsys: pytest.CaptureFixture[str]) -> None:
    done = run_study(ray_vs_fork.main, capsys, "--worlds", "1", "--cases", "2")
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert [line.split()[0] for line in lines] == ["fork", "ray"]
    assert all("median dispatch ms: " in line for line in lines)
