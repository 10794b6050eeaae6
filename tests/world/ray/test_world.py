"""The Ray world on a local two-node Ray cluster (a head and a worker node started on this machine): a case
runs on every rank actor; a raise, a hang, a dead rank and a killed worker node fail with the rank named,
the broken world is torn down, and a new world runs the next case."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from pytest_dmlbench.world.messages import WorldSpec
from pytest_dmlbench.world.registry import CaseEntry, CaseRegistry
from tests.world.ray import cases as ray_cases

ray = pytest.importorskip("ray", reason="the Ray launcher's tests need Ray: pip install 'pytest-dmlbench[ray]'")

from pytest_dmlbench.world.ray.world import RayWorld  # noqa: E402

CASES = ["passes", "raises_on_rank_1", "hangs_on_rank_0", "dies_on_rank_1", "sleeps"]
REGISTRY: CaseRegistry = {name: CaseEntry(getattr(ray_cases, name), ("dist",), {}) for name in CASES}


@pytest.fixture(scope="module")
def cluster() -> Iterator[object]:
    from ray.cluster_utils import Cluster

    local = Cluster(initialize_head=True, head_node_args={"num_cpus": 2, "include_dashboard": False})
    local.add_node(num_cpus=2)
    ray.init(address=local.address, log_to_driver=False,
             runtime_env={"env_vars": {"PYTHONPATH": str(Path(__file__).resolve().parents[3])}})
    yield local
    ray.shutdown()
    local.shutdown()  # type: ignore[no-untyped-call]  # Ray leaves Cluster.shutdown unannotated


def new_world(tmp_path: Path, spread: bool = False) -> RayWorld:
    spec = WorldSpec(world_id=1, world_size=2, backend="gloo", store_path="", out_dir=str(tmp_path), threads=1,
                     init_timeout_s=120)
    world = RayWorld(spec, REGISTRY, spread=spread)
    world.start()
    return world


def run(world: RayWorld, name: str, timeout_s: float = 60) -> object:
    return world.run(name, seed=0, registry_args=(), pickled_args=b"", measure_memory=False,
                     timeout_s=timeout_s)


def gone(pids: list[int], within_s: float = 30) -> bool:
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        if not any(psutil.pid_exists(pid) and psutil.Process(pid).status() != psutil.STATUS_ZOMBIE for pid in pids):
            return True
        time.sleep(0.2)
    return False


def _link(fd: Path) -> str:
    try:
        return str(fd.readlink())
    except OSError:  # closed meanwhile
        return ""


def named_logs(pids: list[int]) -> list[str]:
    """The rank logs these processes hold open that still have a name on disk (an unlinked file's path
    reads "... (deleted)" and no longer exists)."""
    held = [target for pid in pids for fd in Path(f"/proc/{pid}/fd").iterdir()
            if "dmlbench-ray-rank" in (target := _link(fd))]
    assert held, "the detector saw no rank log at all"  # not vacuous
    return [path for path in held if Path(path).exists()]


def test_failures_name_the_rank_and_a_new_world_runs_the_next_case(cluster: object, tmp_path: Path) -> None:
    world = new_world(tmp_path)
    assert world.start_s > 0 and len(set(world.pids)) == 2
    assert len(set(world.nodes)) == 1  # packed on one node: the TCP store and gloo use the loopback
    first = run(world, "passes")
    assert first.passed, first  # type: ignore[attr-defined]
    assert "rank 1 summed 3.0" in first.ranks[1].output  # type: ignore[attr-defined]
    assert not named_logs(world.pids), "a rank's log has a name on disk, so it would outlive a killed actor"
    assert run(world, "passes").passed  # type: ignore[attr-defined]  # the world is kept between cases

    raised = run(world, "raises_on_rank_1")
    assert not raised.passed and raised.world_broken  # type: ignore[attr-defined]
    rank1 = raised.ranks[1]  # type: ignore[attr-defined]
    assert rank1.outcome.status == "failed" and "rank 1 refuses" in rank1.outcome.traceback
    assert gone(world.pids), "the broken world's actors are still alive"

    world = new_world(tmp_path)
    hung = run(world, "hangs_on_rank_0", timeout_s=5)
    assert hung.timed_out and hung.ranks[0].stuck  # type: ignore[attr-defined]
    assert "hangs_on_rank_0" in hung.ranks[0].stack  # type: ignore[attr-defined]
    assert hung.ranks[1].outcome.status == "passed"  # type: ignore[attr-defined]

    world = new_world(tmp_path)
    died = run(world, "dies_on_rank_1")
    assert died.ranks[1].died and "Ray actor died" in died.ranks[1].died  # type: ignore[attr-defined]
    assert died.world_broken  # type: ignore[attr-defined]

    world = new_world(tmp_path)
    assert run(world, "passes").passed  # type: ignore[attr-defined]
    pids = list(world.pids)
    world.stop()
    assert gone(pids), "stopped actors are still alive"


def test_spread_world_spans_two_nodes_and_a_killed_node_fails_its_rank(cluster: object, tmp_path: Path) -> None:
    world = new_world(tmp_path, spread=True)
    assert len(set(world.nodes)) == 2
    assert run(world, "passes").passed  # type: ignore[attr-defined]
    worker = next(node for node in cluster.worker_nodes)  # type: ignore[attr-defined]
    on_worker = world.nodes.index(worker.node_id)
    killer = threading.Timer(3.0, cluster.remove_node, args=(worker,), kwargs={"allow_graceful": False})  # type: ignore[attr-defined]
    killer.start()
    try:
        lost = run(world, "sleeps", timeout_s=120)
    finally:
        killer.join()
    assert lost.world_broken  # type: ignore[attr-defined]
    assert lost.ranks[on_worker].died and "Ray actor died" in lost.ranks[on_worker].died  # type: ignore[attr-defined]
    cluster.add_node(num_cpus=2)  # type: ignore[attr-defined]
    world = new_world(tmp_path, spread=True)
    assert run(world, "passes").passed  # type: ignore[attr-defined]
    world.stop()
