"""Failure paths end to end: a raising rank, a hang, dying ranks; each world is rebuilt and the session goes on."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import Outcome, run_pytest, write_files

ZOO = """
    import ctypes, os, signal, time
    import pytest, torch, torch.distributed as td

    @pytest.mark.dmlbench
    def test_raises_while_others_wait(dist):
        print(f"rank {dist.rank} about to all_reduce")
        if dist.rank == 2:
            raise ValueError("bad shard on rank 2")
        td.all_reduce(torch.ones(1))

    @pytest.mark.dmlbench
    def test_next_case_passes_after_raise(dist):
        td.barrier()

    @pytest.mark.dmlbench(timeout=2)
    def test_hangs(dist):
        if dist.rank == 1:
            time.sleep(600)
        td.barrier()

    @pytest.mark.dmlbench
    def test_next_case_passes_after_hang(dist):
        td.barrier()

    @pytest.mark.dmlbench
    def test_exits(dist):
        if dist.rank == 3:
            os._exit(3)
        td.barrier()

    @pytest.mark.dmlbench
    def test_sigkill(dist):
        if dist.rank == 1:
            os.kill(os.getpid(), signal.SIGKILL)
        td.barrier()

    @pytest.mark.dmlbench
    def test_segfault(dist):
        if dist.rank == 0:
            ctypes.string_at(0)
        td.barrier()

    @pytest.mark.dmlbench
    def test_last_case_passes(dist):
        x = torch.ones(1)
        td.all_reduce(x)
        assert x.item() == dist.world_size
"""


@pytest.fixture(scope="module")
def zoo(tmp_path_factory: pytest.TempPathFactory) -> Outcome:
    folder = tmp_path_factory.mktemp("zoo")
    write_files(folder, **{"test_zoo.py": ZOO})
    # The case timeout is far above the failure grace: a raise that were only noticed at the timeout
    # would report "timed out", which the assertions below rule out.
    return run_pytest(folder, "--dmlbench", "--world-size", "4", "--dmlbench-timeout", "300", "-v")


def section(outcome: Outcome, test: str) -> str:
    """The failure block of one test in the output."""
    text = outcome.output
    start = text.index("\n", text.index(f"_ {test} _")) + 1
    end = text.find("\n____", start + 1)
    summary = text.find("short test summary", start)
    stops = [i for i in (end, summary) if i != -1]
    return text[start:min(stops)]


def test_outcomes_and_recovery(zoo: Outcome) -> None:
    zoo.lines.fnmatch_lines([
        "*test_raises_while_others_wait FAILED*",
        "*test_next_case_passes_after_raise PASSED*",
        "*test_hangs FAILED*",
        "*test_next_case_passes_after_hang PASSED*",
        "*test_exits FAILED*",
        "*test_sigkill FAILED*",
        "*test_segfault FAILED*",
        "*test_last_case_passes PASSED*",
        "*5 failed, 3 passed*",
    ])


def test_raise_reports_the_rank_traceback_and_the_waiting_peers(zoo: Outcome) -> None:
    block = section(zoo, "test_raises_while_others_wait")
    lines = pytest.LineMatcher(block.splitlines())
    lines.fnmatch_lines([
        "distributed case failed on rank(s) 2 of 4 (gloo)",
        "[[]rank 2[]] failed:",
        "*raise ValueError(\"bad shard on rank 2\")",
        "ValueError: bad shard on rank 2",
        "[[]ranks 0, 1, 3[]] did not finish within 1 s after rank 2 failed; each waits in all_reduce "
        "(test_zoo.py:10 in test_raises_while_others_wait); their stack*",
        "*in all_reduce",
        "*test_zoo.py\", line 10 in test_raises_while_others_wait",
        "the world was torn down and will be restarted for the next case",
    ])
    assert "timed out" not in block
    for rank in range(4):
        lines.fnmatch_lines([f"*Captured rank {rank} output call*", f"rank {rank} about to all_reduce"])


def test_hang_reports_every_rank_stack_at_the_timeout(zoo: Outcome) -> None:
    lines = pytest.LineMatcher(section(zoo, "test_hangs").splitlines())
    lines.fnmatch_lines([
        "distributed case timed out after 2 s on 4 rank(s) (gloo): rank(s) 1 held it up, outside any collective, "
        "while rank(s) 0, 2, 3 wait in one; look at what rank(s) 1 do instead.",
        "  ranks 0, 2, 3: in barrier (test_zoo.py:20 in test_hangs)",
        "  rank 1: outside any collective, at test_zoo.py:19 in test_hangs",
        "[[]rank 1[]] still running at the 2 s timeout; it is outside any collective, at test_zoo.py:19 in "
        "test_hangs; its stack:",
        "*test_zoo.py\", line 19 in test_hangs",
        "[[]ranks 0, 2, 3[]] still running at the 2 s timeout; each waits in barrier (test_zoo.py:20 in test_hangs); "
        "their stack*",
        "*in barrier",
        "*test_zoo.py\", line 20 in test_hangs",
    ])


@pytest.mark.parametrize(
    ("test", "death"),
    [
        ("test_exits", "rank 3 died (exit code 3)"),
        ("test_sigkill", "rank 1 died (killed by signal 9 (SIGKILL))"),
        ("test_segfault", "rank 0 died (killed by signal 11 (SIGSEGV))"),
    ],
)
def test_dead_ranks_are_named_with_their_exit_status(zoo: Outcome, test: str, death: str) -> None:
    block = section(zoo, test)
    assert death in block.splitlines()[0], block
    assert f"[{death.split(' died')[0]}] died: {death.split('(', 1)[1][:-1]}" in block


def test_segfault_shows_the_fatal_error_in_the_rank_output(zoo: Outcome) -> None:
    lines = pytest.LineMatcher(section(zoo, "test_segfault").splitlines())
    lines.fnmatch_lines(["*Captured rank 0 output call*", "Fatal Python error: Segmentation fault", "*test_segfault*"])


def test_an_unexpected_world_start_failure_is_reported(tmp_path: Path) -> None:
    """A rank that cannot join (here: gloo told to use a missing interface) fails the case with the reason."""
    write_files(tmp_path, **{"test_x.py": """
        import pytest

        @pytest.mark.dmlbench
        def test_case(dist):
            pass
    """})
    result = run_pytest(tmp_path, "--dmlbench", "--world-size", "2", GLOO_SOCKET_IFNAME="no-such-interface")
    assert result.returncode == 1
    result.lines.fnmatch_lines([
        "*the rank world could not be started: rank ? (pid *) exit code 1 while joining the process group.*",
        "*--- rank ? output ---*",
        "*no-such-interface*",
    ])


def test_nccl_world_refused_after_cuda_was_initialised(monkeypatch: pytest.MonkeyPatch) -> None:
    """No GPU exists here, so CUDA having been initialised before the fork is simulated."""
    import torch

    from pytest_dmlbench.errors import WorldError
    from pytest_dmlbench.world.forked.pool import WorldPool

    monkeypatch.setattr(torch.cuda, "is_initialized", lambda: True)
    pool = WorldPool(dict, lambda ws: 1)
    try:
        pool.start_zygote()
        with pytest.raises(WorldError, match="CUDA was initialised in the pytest process before the rank"):
            pool.world("nccl", 1)
    finally:
        pool.close()
