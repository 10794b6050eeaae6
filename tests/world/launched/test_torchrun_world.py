"""Under torchrun the launcher's world size is the default; two loopback "nodes" agree on every verdict."""

from __future__ import annotations

import socket
import subprocess
from pathlib import Path

import pytest

from pytest_dmlbench.errors import ConfigError
from pytest_dmlbench.world.launched.engine import launcher_world_size
from tests import forkserver
from tests.conftest import Outcome, clean_env, run_pytest, write_files

CASES = """
    import pytest, torch, torch.distributed as td

    @pytest.mark.dmlbench
    def test_sum(dist):
        x = torch.tensor([float(dist.rank)])
        td.all_reduce(x)
        assert x.item() == sum(range(dist.world_size))

    @pytest.mark.dmlbench
    def test_rank1_disagrees(dist):
        assert dist.rank != 1, "rank 1 sees a different value"

    @pytest.mark.dmlbench(world_size=3)
    def test_needs_three(dist):
        pass
"""

# Every rank writes the verdicts it reached, so the test can check that all ranks agree.
VERDICTS_CONFTEST = """
    import os

    def pytest_runtest_logreport(report):
        if report.when == "call" or report.outcome != "passed":
            with open(f"verdicts-rank{os.environ['RANK']}.txt", "a") as out:
                out.write(f"{report.nodeid} {report.when} {report.outcome}\\n")
"""


def test_launcher_world_size_is_the_default_and_a_conflict_is_refused() -> None:
    assert launcher_world_size({"WORLD_SIZE": "4"}, None) == 4
    assert launcher_world_size({"WORLD_SIZE": "4"}, "4") == 4
    with pytest.raises(ConfigError, match=r"--world-size 2 conflicts with the launcher's world of 4 rank"):
        launcher_world_size({"WORLD_SIZE": "4"}, "2")


def _torchrun(folder: Path, nproc: int, *args: str, nnodes: int = 1, node_rank: int = 0,
              port: int = 0, **env: str) -> subprocess.Popen[str]:
    rendezvous = (["--standalone"] if nnodes == 1 else
                  ["--rdzv-backend", "static", "--master-addr", "127.0.0.1", "--master-port", str(port),
                   "--node-rank", str(node_rank)])
    environment = clean_env(**env)
    return subprocess.Popen(
        [forkserver.python(environment), "-m", "torch.distributed.run", *rendezvous, "--nnodes", str(nnodes),
         "--nproc-per-node", str(nproc), "--log-dir", str(folder / f"torchrun-logs-{node_rank}"),  # not in /tmp
         "-m", "pytest", "-p", "no:cacheprovider", "-p", "no:randomly",
         "--dmlbench", *args],
        cwd=folder, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=environment,
    )


def _finish(proc: subprocess.Popen[str]) -> Outcome:
    output, _ = proc.communicate(timeout=300)
    return Outcome(proc.returncode, output)


def test_without_world_size_cases_take_the_launchers_size(tmp_path: Path) -> None:
    write_files(tmp_path, **{"test_x.py": CASES, "pytest.ini": "[pytest]\n"})
    result = _finish(_torchrun(tmp_path, 3, "-rs", "test_x.py"))
    assert result.returncode != 0
    result.lines.fnmatch_lines(["*distributed case failed on rank(s) 1 of 3 (gloo)*", "*1 failed, 2 passed*"])
    assert "needs" not in result.output, "no case is skipped for its world size"


@pytest.mark.parametrize("rank", ["0", "1"])
def test_a_conflicting_world_size_is_a_usage_error_on_every_rank(tmp_path: Path, rank: str) -> None:
    # Each rank refuses on its own, before any rendezvous: with nobody listening on port 1 a rank that
    # tried to join first would wait for its peers instead of exiting.
    write_files(tmp_path, **{"test_x.py": CASES})
    result = run_pytest(tmp_path, "--dmlbench", "--world-size", "3", timeout=120, RANK=rank, WORLD_SIZE="2",
                        MASTER_ADDR="127.0.0.1", MASTER_PORT="1")
    assert result.returncode == pytest.ExitCode.USAGE_ERROR, result.output
    result.lines.fnmatch_lines(["*--world-size 3 conflicts with the launcher's world of 2 rank(s)*"])


def _free_loopback_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def test_two_loopback_nodes_agree_on_every_verdict_and_rank_0_reports(tmp_path: Path) -> None:
    write_files(tmp_path, **{"test_x.py": CASES, "conftest.py": VERDICTS_CONFTEST, "pytest.ini": "[pytest]\n"})
    port = _free_loopback_port()
    nodes = [_torchrun(tmp_path, 2, "-rs", "test_x.py", nnodes=2, node_rank=rank, port=port) for rank in (0, 1)]
    node0, node1 = (_finish(node) for node in nodes)
    assert node0.returncode != 0 and node1.returncode != 0, (node0.output, node1.output)
    node0.lines.fnmatch_lines([
        "*distributed case failed on rank(s) 1 of 4 (gloo)*",
        "*AssertionError: rank 1 sees a different value*",
        "*needs 3 rank(s); the launcher started 4*",
        "*1 failed, 1 passed, 1 skipped*",
    ])
    assert node0.output.count("test session starts") == 1 and "test session starts" not in node1.output
    verdicts = [(tmp_path / f"verdicts-rank{rank}.txt").read_text() for rank in range(4)]
    assert verdicts[0].splitlines() == [
        "test_x.py::test_sum call passed",
        "test_x.py::test_rank1_disagrees call failed",
        "test_x.py::test_needs_three setup skipped",
    ]
    assert all(v == verdicts[0] for v in verdicts), verdicts


def test_the_same_cases_in_different_orders_are_refused(tmp_path: Path) -> None:
    # What pytest-randomly does with a different seed on each rank; negative control: same order on both.
    write_files(tmp_path, **{"test_x.py": CASES, "pytest.ini": "[pytest]\n", "conftest.py": """
        import os

        def pytest_collection_modifyitems(items):
            if os.environ["RANK"] == "1" and os.environ.get("REORDER"):
                items.reverse()
    """})
    result = _finish(_torchrun(tmp_path, 2, "test_x.py", REORDER="1"))
    assert result.returncode != 0
    result.lines.fnmatch_lines(["*ranks collected the same cases in different orders*"])
    result = _finish(_torchrun(tmp_path, 2, "test_x.py"))
    assert "different orders" not in result.output
    result.lines.fnmatch_lines(["*1 failed, 1 passed, 1 skipped*"])
