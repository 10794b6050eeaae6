"""Under torchrun every rank runs pytest itself: cases run in-process, verdicts are gathered, rank 0 reports."""

from __future__ import annotations

import subprocess
from pathlib import Path

from pytest_dmlbench.world.launched.engine import launched_externally
from tests import forkserver
from tests.conftest import Outcome, clean_env, write_files

CASES = """
    import os, pytest, torch, torch.distributed as td

    @pytest.mark.dmlbench
    def test_sum(dist):
        x = torch.tensor([float(dist.rank)])
        td.all_reduce(x)
        assert x.item() == 1.0

    @pytest.mark.dmlbench
    def test_rank1_disagrees(dist):
        assert dist.rank != 1, "rank 1 sees a different value"

    @pytest.mark.dmlbench(world_size=3)
    def test_needs_three(dist):
        pass

    if os.environ.get("EXTRA_ON_RANK1") and os.environ["RANK"] == "1":
        @pytest.mark.dmlbench
        def test_only_on_rank1(dist):
            pass
"""


def torchrun(folder: Path, *args: str, **env: str) -> Outcome:
    environment = clean_env(**env)
    proc = subprocess.run(
        [forkserver.python(environment), "-m", "torch.distributed.run", "--standalone", "--nnodes", "1",
         "--nproc-per-node", "2",
         "--log-dir", str(folder / "torchrun-logs"),  # torch's agent would leave a /tmp/torchelastic_* folder
         "-m", "pytest", "-p", "no:cacheprovider", "-p", "no:randomly", "--dmlbench", *args],
        cwd=folder, capture_output=True, text=True, timeout=300, env=environment,
    )
    return Outcome(proc.returncode, proc.stdout + proc.stderr)


def test_detects_launchers() -> None:
    assert launched_externally({"TORCHELASTIC_RUN_ID": "x"})
    assert launched_externally({"RANK": "0", "WORLD_SIZE": "2", "MASTER_ADDR": "h", "MASTER_PORT": "1"})
    assert not launched_externally({"RANK": "0"})


def test_cases_run_in_every_launched_rank_and_rank_0_reports(tmp_path: Path) -> None:
    write_files(tmp_path, **{"test_x.py": CASES, "pytest.ini": "[pytest]\n"})
    result = torchrun(tmp_path, "-rs", "test_x.py")
    assert result.returncode != 0
    result.lines.fnmatch_lines([
        "*distributed case failed on rank(s) 1 of 2 (gloo)*",
        "*AssertionError: rank 1 sees a different value*",
        "*needs 3 rank(s); the launcher started 2*",
        "*1 failed, 1 passed, 1 skipped*",
    ])
    assert result.output.count("test session starts") == 1, "only rank 0 reports"


def test_different_collections_are_refused(tmp_path: Path) -> None:
    write_files(tmp_path, **{"test_x.py": CASES, "pytest.ini": "[pytest]\n"})
    result = torchrun(tmp_path, "test_x.py", EXTRA_ON_RANK1="1")
    assert result.returncode != 0
    result.lines.fnmatch_lines(["*ranks collected different cases*", "*rank 0: 3 case(s)*", "*rank 1: 4 case(s)*"])
