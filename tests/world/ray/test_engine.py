"""``--dmlbench-launcher ray`` end to end: the plugin's cases run on Ray actor worlds (an embedded local Ray
instance) with the forked engine's failure contract; a bad launcher value is a usage error."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from tests.conftest import run_pytest, write_files
from tests.world.test_isolation import UNMATCHED

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
    # then the forked engine's unmatched-collective pair: test_1 leaves one, test_2 must not meet it
    write_files(tmp_path, **{"test_ray_cases.py": CASES + textwrap.dedent(UNMATCHED)})
    result = run_pytest(tmp_path, "--dmlbench", "--dmlbench-launcher", "ray", "-rs", "-v",
                        "-p", "no:randomly", "test_ray_cases.py", timeout=600)
    result.lines.fnmatch_lines([
        "*distributed case failed on rank(s) 1 of 2 (gloo)*",
        "*rank 1 disagrees*",
        # the forked engine's agreement check holds on Ray worlds too: the case that left a collective
        # unmatched fails itself, and the next case gets a new world instead of meeting the stray collective
        "*rank 0 issued 3 collectives, rank 1 issued 2: a collective was left unmatched*",
        "*the Ray launcher runs gloo worlds*",
        "*2 failed, 3 passed, 1 skipped*",
    ])
    assert "test_2_innocent FAILED" not in result.output and "test_2_innocent PASSED" in result.output
