"""Workers of the Ray instance the plugin starts find their own instance when several run on the machine
(the paired gate runs three). Ray's address lookup without an address, which Ray Train's internals use,
otherwise finds another instance: it fails with "Found multiple active Ray instances", or, while a cluster
address is recorded in Ray's temp folder (``ray start``, or Ray's test ``Cluster`` that another test of this
suite runs), it returns that cluster's address."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from collections.abc import Iterator

import pytest

ray = pytest.importorskip("ray", reason="the Ray launcher's tests need Ray: pip install 'pytest-dmlbench[ray]'")

from pytest_dmlbench.world.ray.local import start_local  # noqa: E402

OTHER_INSTANCE = textwrap.dedent("""
    import sys, time, ray
    from pytest_dmlbench.world.ray.local import start_local
    start_local(ray, num_cpus=1)
    print("started", flush=True)
    sys.stdin.read()  # until the test closes it
""")


@pytest.fixture
def another_local_ray() -> Iterator[None]:
    """A second local instance of the plugin's kind, in another process, for the test's duration."""
    other = subprocess.Popen([sys.executable, "-c", OTHER_INSTANCE], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                             text=True)
    try:
        assert other.stdout is not None and other.stdout.readline().strip() == "started"
        yield
    finally:
        assert other.stdin is not None
        other.stdin.close()
        other.wait(60)


def _lookup(drop_pinned_address: bool) -> str:
    import os

    from ray._private.services import canonicalize_bootstrap_address_or_die

    if drop_pinned_address:
        os.environ.pop("RAY_ADDRESS", None)
    try:
        # What Ray's state API calls. Ray annotates the address as str, but documents and handles None (no
        # address: look the instance up), which is the lookup under test ("auto" would also take other clusters).
        return str(canonicalize_bootstrap_address_or_die(None))  # type: ignore[arg-type]
    except ConnectionError as exc:
        return f"error: {exc}"


def test_a_worker_finds_its_own_instance_beside_another(another_local_ray: None) -> None:
    assert not ray.is_initialized()
    start_local(ray, num_cpus=1)
    try:
        own = ray.get_runtime_context().gcs_address
        lookup = ray.remote(_lookup)
        assert ray.get(lookup.remote(False)) == own
        # negative control: the same lookup without the address the setup hook pinned misses the own instance
        # (an error while no cluster address is recorded, else the recorded cluster's address: which one
        # depends on what another test or user runs on the machine meanwhile, so either is accepted)
        unpinned = ray.get(lookup.remote(True))
        assert unpinned != own
        assert unpinned.startswith("error: Found multiple active Ray instances") or ":" in unpinned, unpinned
    finally:
        ray.shutdown()
