"""The local Ray the plugin starts listens on loopback only: while a Ray world runs (started through
``RayWorld.start``, the plugin's own path), no process of the tree listens on a wildcard or network address,
and the world's TCP store is on 127.0.0.1. Negative controls: the same detector finds Ray's wildcard
listeners when Ray is started the default way, and a TCPStore that opens its own socket on ``::``."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta

import pytest

from pytest_dmlbench.world.messages import WorldSpec
from pytest_dmlbench.world.registry import CaseEntry, CaseRegistry
from tests.world import ray_cases
from tests.world.listeners import listeners, named, process_tree

ray = pytest.importorskip("ray", reason="the Ray launcher's tests need Ray: pip install 'pytest-dmlbench[ray]'")

from pytest_dmlbench.world.ray_world import RayWorld  # noqa: E402

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
