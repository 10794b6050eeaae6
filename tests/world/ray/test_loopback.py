"""The local Ray the plugin starts listens on loopback only: while a Ray world runs (started through
``RayWorld.start``, the plugin's own path), no process of the tree listens on a wildcard or network address,
and the world's TCP store is on 127.0.0.1; a Ray Train fit on the embedded instance opens its process
group's store on 127.0.0.1 only. Negative controls: the same detector finds Ray's wildcard listeners when
Ray is started the default way, a TCPStore that opens its own socket on ``::``, and torch's own
``env://`` rendezvous store on ``::`` before the worker hook replaces it."""

from __future__ import annotations

import importlib
import socket
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import psutil
import pytest

from pytest_dmlbench.measure import torch_patches
from pytest_dmlbench.world.bound_store import bind_rendezvous_stores
from pytest_dmlbench.world.messages import WorldSpec
from pytest_dmlbench.world.registry import CaseEntry, CaseRegistry
from tests.world.listeners import Listener, listeners, named, process_tree
from tests.world.ray import cases as ray_cases

ray = pytest.importorskip("ray", reason="the Ray launcher's tests need Ray: pip install 'pytest-dmlbench[ray]'")

from pytest_dmlbench.world.ray.world import RayWorld  # noqa: E402

REGISTRY: CaseRegistry = {"passes": CaseEntry(ray_cases.passes, ("dist",), {})}


@pytest.fixture
def no_ray() -> Iterator[None]:
    """No Ray instance before the test; none after it."""
    assert not ray.is_initialized(), "an earlier test left Ray running in this process"
    yield
    ray.shutdown()


def test_a_ray_world_listens_on_loopback_only(no_ray: None) -> None:
    spec = WorldSpec(world_id=1, world_size=2, backend="gloo", store_path="", out_dir="", threads=1,
                     init_timeout_s=120)
    world = RayWorld(spec, REGISTRY)
    world.start()  # starts the local Ray instance (RAY_ADDRESS is not set in the test run)
    try:
        assert world.run("passes", seed=0, registry_args=(), pickled_args=b"", measure_memory=False,
                         timeout_s=60).passed
        found = listeners(process_tree())
        exposed = [listener for listener in found if not listener.loopback]
        assert not exposed, "listening beyond loopback while a Ray world runs:\n  " + named(exposed)
        # not vacuous: the detector saw Ray's servers, both rank actors and rank 0's TCP store
        assert {"gcs_server", "raylet"} <= {listener.process for listener in found}, named(found)
        assert set(world.pids) <= {listener.pid for listener in found}, named(found)
        assert world.store_address is not None and world.store_address[0] == "127.0.0.1"
        store = [listener for listener in found if listener.pid == world.pids[0]
                 and listener.port == world.store_address[1] and listener.protocol == "tcp"]
        assert store, f"rank 0's TCP store {world.store_address} is not among\n  {named(found)}"
    finally:
        world.stop()


def test_the_detector_finds_the_wildcard_listeners_of_a_default_ray(no_ray: None) -> None:
    ray.init(address="local", num_cpus=1, include_dashboard=False, log_to_driver=False)  # Ray's own binding
    if ray.util.get_node_ip_address() == "127.0.0.1":
        pytest.skip("this machine has no network route, so even Ray's default node address is loopback")
    wildcard = [listener for listener in listeners(process_tree()) if listener.wildcard]
    assert {"gcs_server", "raylet"} <= {listener.process for listener in wildcard}, named(wildcard)


def test_the_detector_finds_a_tcp_store_that_binds_its_own_socket() -> None:
    import torch.distributed as td

    store = td.TCPStore("127.0.0.1", 0, 1, is_master=True, timeout=timedelta(seconds=30),  # type: ignore[attr-defined]
                        wait_for_workers=False)
    wildcard = [listener for listener in listeners(process_tree()) if listener.wildcard]
    assert store.port in {listener.port for listener in wildcard}, named(wildcard)


@pytest.fixture
def rendezvous_restored() -> Iterator[None]:
    """torch's rendezvous store factory as it was before the test: the hook's patch is taken off through the
    registry it was installed with, which then no longer lists it."""
    rendezvous: Any = importlib.import_module("torch.distributed.rendezvous")  # not torch.distributed's function

    original = rendezvous._create_c10d_store
    before = set(map(id, torch_patches.installed()))
    yield
    torch_patches.restore_all([patch for patch in torch_patches.installed() if id(patch) not in before])
    assert rendezvous._create_c10d_store is original


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _env_store_listeners(port: int) -> list[Listener]:
    """Rank 0 of a one-rank ``env://`` rendezvous on 127.0.0.1:``port``: where its store listens."""
    rendezvous: Any = importlib.import_module("torch.distributed.rendezvous")  # not torch.distributed's function

    os_env = {"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port), "RANK": "0", "WORLD_SIZE": "1"}
    with pytest.MonkeyPatch.context() as patch:
        for name, value in os_env.items():
            patch.setenv(name, value)
        store, _, _ = next(rendezvous.rendezvous("env://", timeout=timedelta(seconds=30)))
    found = [listener for listener in listeners([psutil.Process()]) if listener.port == port]
    del store
    return found


def test_the_rendezvous_hook_keeps_rank_0s_store_on_its_host(rendezvous_restored: None) -> None:
    port = free_port()
    # negative control first: torch's own rendezvous store listens on every interface
    assert any(listener.wildcard for listener in _env_store_listeners(port)), "torch's store did not bind ::"
    bind_rendezvous_stores()
    port = free_port()
    found = _env_store_listeners(port)
    assert found and all(listener.host == "127.0.0.1" for listener in found), named(found)


def _report_store_listeners() -> None:
    """A Ray Train loop: rank 0 reports where the process group's store (MASTER_PORT) listens (Ray Train
    keeps a run's metrics only with a checkpoint, so rank 0 attaches an empty one)."""
    import os
    import tempfile

    import psutil as ps
    import ray.train

    port = int(os.environ["MASTER_PORT"])
    found = sorted(f"{c.laddr.ip}:{c.laddr.port}" for c in ps.Process().net_connections(kind="tcp")
                   if c.status == ps.CONN_LISTEN and c.laddr.port == port)
    metrics = {"store_listeners": ";".join(found), "port": port}
    if ray.train.get_context().get_world_rank() != 0:
        ray.train.report(metrics)
        return
    with tempfile.TemporaryDirectory() as folder:
        ray.train.report(metrics, checkpoint=ray.train.Checkpoint.from_directory(folder))


@pytest.mark.slow
def test_a_ray_train_fit_on_the_embedded_ray_listens_on_loopback_only(no_ray: None, tmp_path: Path) -> None:
    """A whole fit (55-73 s on a 2-core runner), so daily; every CI run keeps its fast form: the Ray Train smoke's
    probe (tests/experiments/test_ray_train.py) opens the rendezvous store in a task of the embedded Ray and
    finds it on loopback only, and the tests above check the hook and the detector."""
    train = pytest.importorskip("ray.train.torch", reason="needs Ray Train: pip install 'pytest-dmlbench[ray]'")
    from ray.train import RunConfig, ScalingConfig

    from pytest_dmlbench.experiments.ray_cluster import connect, cpus_per_worker

    connection = connect()
    assert connection.started_here
    scaling = ScalingConfig(num_workers=2, use_gpu=False,
                            resources_per_worker={"CPU": cpus_per_worker(connection.cpus, 2)})
    trainer = train.TorchTrainer(_report_store_listeners, scaling_config=scaling,
                                 torch_config=train.TorchConfig(backend="gloo"),
                                 run_config=RunConfig(storage_path=str(tmp_path)))
    result = trainer.fit()
    assert result.error is None, result.error
    metrics = result.metrics
    assert metrics is not None and metrics["store_listeners"] == f"127.0.0.1:{metrics['port']}", metrics
