"""Backend and device selection. No GPU exists here: device counts are passed in, and the one
end-to-end check uses the machine's real (zero) device count."""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_dmlbench.world.backend import device_for, select_backend
from pytest_dmlbench.world.run_facts import RunFacts
from tests.conftest import run_pytest, write_files


@pytest.mark.parametrize(
    ("requested", "world_size", "devices", "backend", "skips"),
    [
        ("auto", 4, 0, "gloo", False),
        ("auto", 4, 2, "gloo", False),  # fewer devices than ranks: never share a GPU between NCCL ranks
        ("auto", 4, 4, "nccl", False),
        ("auto", 2, 8, "nccl", False),
        ("gloo", 2, 8, "gloo", False),
        ("nccl", 4, 4, "nccl", False),
        ("nccl", 4, 3, "nccl", True),
        ("nccl", 1, 0, "nccl", True),
    ],
)
def test_select_backend(requested: str, world_size: int, devices: int, backend: str, skips: bool) -> None:
    choice = select_backend(requested, world_size, devices)
    assert choice.backend == backend
    assert (choice.skip_reason is not None) == skips
    if skips:
        assert f"world size {world_size}, {devices} device(s) visible" in (choice.skip_reason or "")


def test_devices_follow_ranks() -> None:
    assert [device_for("nccl", r) for r in range(3)] == ["cuda:0", "cuda:1", "cuda:2"]
    assert device_for("gloo", 3) == "cpu"


def test_threads_share_the_cores() -> None:
    assert RunFacts(cores=2, workers=1).threads_per_rank(1) == 2
    assert RunFacts(cores=2, workers=1).threads_per_rank(4) == 1
    assert RunFacts(cores=16, workers=2).threads_per_rank(4) == 2


def test_nccl_without_gpus_is_a_skip_with_reason(tmp_path: Path) -> None:
    write_files(tmp_path, **{"test_x.py": """
        import pytest

        @pytest.mark.dmlbench
        def test_default(dist):
            assert dist.backend == "gloo" and dist.device == "cpu"

        @pytest.mark.dmlbench(backend="nccl")
        def test_pinned_nccl(dist):
            raise AssertionError("must not run without GPUs")
    """})
    result = run_pytest(tmp_path, "--dmlbench", "--world-size", "2", "-rs")
    assert result.returncode == 0, result.output
    result.lines.fnmatch_lines([
        "SKIPPED [[]1[]] *: nccl needs one CUDA device per rank: world size 2, 0 device(s) visible; "
        "use --dmlbench-backend gloo or a smaller world",
        "*1 passed, 1 skipped*",
    ])


@pytest.mark.parametrize(("cores", "workers", "world_size", "oversubscribed", "threads"), [
    (2, 1, 2, False, 1), (2, 1, 4, True, 1), (2, 2, 2, True, 1),
    (4, 1, 4, False, 1), (4, 2, 4, True, 1), (4, 1, 2, False, 2),
    (16, 1, 4, False, 4), (16, 2, 4, False, 2), (16, 2, 9, True, 1),
])
def test_oversubscription_and_threads_on_2_4_and_16_cores(cores: int, workers: int, world_size: int,
                                                         oversubscribed: bool, threads: int) -> None:
    """The machine-dependent branches with the core count injected: this machine has 2 cores, a CI runner
    or a workstation 4 or 16, and the same run must warn (or not) and size its threads accordingly."""
    facts = RunFacts(cores=cores, workers=workers)
    assert facts.oversubscribed(world_size) is oversubscribed
    assert facts.threads_per_rank(world_size) == threads
    assert facts.to_dict(world_size, 10.0)["oversubscribed"] is oversubscribed
