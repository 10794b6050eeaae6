"""``--dmlbench-launcher ray`` end to end: the plugin's cases run on Ray actor worlds (an embedded local Ray
instance) with the forked engine's failure contract; a bad launcher value is a usage error."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import run_pytest, write_files

CASES = """
import os, pytest, torch, torch.distributed as td

@pytest.mark.dmlbench(world_size=2)
def test_a_sums(dist):
    x = torch.full((3,), float(dist.rank + 1))
    td.all_reduce(x)
    assert torch.all(x == 3.0)

@pytest.mark.dmlbench(world_size=2)
def test_b_raises_on_rank_1(dist):
    assert dist.rank != 1, "rank 1 disagrees"

@pytest.mark.dmlbench(world_size=2)
def test_c_next_case_passes_on_a_new_world(dist):
    td.barrier()

@pytest.mark.dmlbench(world_size=2, backend="nccl")
def test_d_nccl(dist):
    pass
"""


def test_bad_launcher_is_a_usage_error(tmp_path: Path) -> None:
    write_files(tmp_path, **{"test_x.py": "def test_x():\n    pass\n"})
    result = run_pytest(tmp_path, "--dmlbench", "--dmlbench-launcher", "slurm")
    assert result.returncode == 4
    result.lines.fnmatch_lines(["*--dmlbench-launcher: 'slurm' is not a launcher; choose one of fork, ray*"])


def test_cases_run_on_ray_actor_worlds(tmp_path: Path) -> None:
    pytest.importorskip("ray", reason="the Ray launcher needs Ray: pip install 'pytest-dmlbench[ray]'")
    write_files(tmp_path, **{"test_ray_cases.py": CASES})
    result = run_pytest(tmp_path, "--dmlbench", "--dmlbench-launcher", "ray", "-rs",
                        "test_ray_cases.py", timeout=600)
    result.lines.fnmatch_lines([
        "*distributed case failed on rank(s) 1 of 2 (gloo)*",
        "*rank 1 disagrees*",
        "*the Ray launcher runs gloo worlds*",
        "*1 failed, 2 passed, 1 skipped*",
    ])
