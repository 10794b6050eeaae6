"""Every case starts from a clean world: state a case leaves behind, unmatched collectives, destroyed groups.

Each test runs a leaking case, then a case that checks the state, on the same persistent world of two
ranks (cases run in file order). Negative controls run the same pair with the guard's restore disabled
(``DMLBENCH_TEST_NO_RESTORE`` in a conftest that patches it out) and show the check case then fails.
"""

from __future__ import annotations

import fnmatch
from pathlib import Path

import pytest

from tests.conftest import run_pytest, write_files

LEAKS = {
    "grad_mode": ("torch.set_grad_enabled(False)", "assert torch.is_grad_enabled()"),
    "inference_mode": ("global KEEP; KEEP = torch.inference_mode(); KEEP.__enter__()",
                       "assert not torch.is_inference_mode_enabled() and torch.is_grad_enabled()"),
    "default_dtype": ("torch.set_default_dtype(torch.float64)", "assert torch.ones(1).dtype == torch.float32"),
    "threads": ("global BEFORE; BEFORE = torch.get_num_threads(); torch.set_num_threads(BEFORE + 5)",
                "assert torch.get_num_threads() == BEFORE"),
    "anomaly": ("torch.autograd.set_detect_anomaly(True)", "assert not torch.is_anomaly_enabled()"),
    "deterministic": ("torch.use_deterministic_algorithms(True)",
                      "assert not torch.are_deterministic_algorithms_enabled()"),
    "environment": ("os.environ['LEAKED'] = '1'; os.environ.pop('HOME', None)",
                    "assert 'LEAKED' not in os.environ and 'HOME' in os.environ"),
    "cwd": ("os.chdir('/')", "assert os.getcwd() != '/'"),
    "dist_function": ("td.all_reduce = lambda *a, **k: None; td.distributed_c10d.barrier = None",
                      "x = torch.ones(1); td.all_reduce(x); td.distributed_c10d.barrier(); assert x.item() == 2"),
}

NO_RESTORE_CONFTEST = """
    from pytest_dmlbench.world import guard

    guard.StateSnapshot.restore = lambda self: []
"""


def _leak_then_check(leak: str, check: str) -> str:
    return f"""
        import os
        import pytest, torch, torch.distributed as td

        @pytest.mark.dmlbench(world_size=2)
        def test_1_leaks(dist):
            {leak}

        @pytest.mark.dmlbench(world_size=2)
        def test_2_sees_a_clean_state(dist):
            {check}
    """


def _leak_files(**extra: str) -> dict[str, str]:
    files = {f"test_{name}.py": _leak_then_check(leak, check) for name, (leak, check) in LEAKS.items()}
    return {**files, **extra}


def test_the_next_case_sees_a_clean_state_after_each_leak(tmp_path: Path) -> None:
    write_files(tmp_path, **_leak_files())
    result = run_pytest(tmp_path, "--dmlbench", "-v", "-p", "no:randomly")
    assert result.returncode == 0, result.output
    for name in LEAKS:
        result.lines.fnmatch_lines([f"*test_{name}.py::test_1_leaks PASSED*",
                                    f"*test_{name}.py::test_2_sees_a_clean_state PASSED*"])


def test_negative_control_without_restore_every_leak_reaches_the_next_case(tmp_path: Path) -> None:
    write_files(tmp_path, **_leak_files(**{"conftest.py": NO_RESTORE_CONFTEST}))
    result = run_pytest(tmp_path, "--dmlbench", "-p", "no:randomly", "-v")
    assert result.returncode == 1, result.output
    for name in LEAKS:
        result.lines.fnmatch_lines([f"*test_{name}.py::test_2_sees_a_clean_state FAILED*"])
    result.lines.fnmatch_lines([f"*{len(LEAKS)} failed, {len(LEAKS)} passed*"])


UNMATCHED = """
    import pytest, torch, torch.distributed as td

    @pytest.mark.dmlbench(world_size=2)
    def test_1_leaves_a_collective_unmatched(dist):
        td.all_reduce(torch.ones(1))
        td.barrier()
        if dist.rank == 0:
            td.all_reduce(torch.ones(1), async_op=True)

    @pytest.mark.dmlbench(world_size=2, timeout=60)
    def test_2_innocent(dist):
        x = torch.ones(1)
        td.all_reduce(x)
        assert x.item() == 2
"""


def test_an_unmatched_collective_fails_its_own_case_and_the_next_case_passes(tmp_path: Path) -> None:
    write_files(tmp_path, **{"test_unmatched.py": UNMATCHED})
    result = run_pytest(tmp_path, "--dmlbench", "-v", "-p", "no:randomly")
    assert result.returncode == 1, result.output
    result.lines.fnmatch_lines([
        "*test_1_leaves_a_collective_unmatched FAILED*",
        "*test_2_innocent PASSED*",
        "*rank 0 issued 3 collectives, rank 1 issued 2: a collective was left unmatched*",
        "*wait for asynchronous ones*",
        "*the world was torn down and will be restarted for the next case*",
    ])


@pytest.mark.parametrize("accounting", [True, False], ids=["accounted", "negative-control-unaccounted"])
def test_point_to_point_traffic_is_not_mistaken_for_an_unmatched_collective(tmp_path: Path,
                                                                            accounting: bool) -> None:
    # A three-stage chain: rank 0 only sends, rank 2 only receives; the sequence numbers differ by design.
    if not accounting:
        write_files(tmp_path, **{"conftest.py": """
            from pytest_dmlbench.world import groups

            groups._P2P_METHODS = ()
        """})
    write_files(tmp_path, **{"test_p2p.py": """
        import pytest, torch, torch.distributed as td

        @pytest.mark.dmlbench(world_size=3)
        def test_chain(dist):
            x = torch.full((2,), float(dist.rank))
            if dist.rank > 0:
                td.recv(x, dist.rank - 1)
            if dist.rank < 2:
                work = td.isend(x, dist.rank + 1)
                work.wait()
            ops = [td.P2POp(td.isend, x, 1)] if dist.rank == 0 else [td.P2POp(td.irecv, x, 0)] if dist.rank == 1 else []
            for work in td.batch_isend_irecv(ops) if ops else []:
                work.wait()
            td.all_reduce(x)
    """})
    result = run_pytest(tmp_path, "--dmlbench", "-v")
    if accounting:
        assert result.returncode == 0, result.output
    else:
        assert result.returncode == 1, result.output
        result.lines.fnmatch_lines(["*a collective was left unmatched*"])


DESTROYS = """
    import pytest, torch, torch.distributed as td

    @pytest.mark.dmlbench(world_size=2)
    def test_1_destroys_the_default_group(dist):
        td.destroy_process_group.__wrapped__()  # torch's own: the one a case calls keeps the world's group

    @pytest.mark.dmlbench(world_size=2)
    def test_2_innocent(dist):
        x = torch.ones(1)
        td.all_reduce(x)
        assert x.item() == 2
"""


def test_a_destroyed_default_group_is_rebuilt_and_the_case_is_named(tmp_path: Path) -> None:
    write_files(tmp_path, **{"test_destroys.py": DESTROYS})
    result = run_pytest(tmp_path, "--dmlbench", "-v", "-p", "no:randomly")
    assert result.returncode == 0, result.output
    result.lines.fnmatch_lines([
        "*test_1_destroys_the_default_group PASSED*",
        "*test_2_innocent PASSED*",
        "*WorldRebuiltWarning: test_destroys.py::test_1_destroys_the_default_group left its world unusable "
        "(ranks 0, 1: the case destroyed the default process group)*",
    ])


def test_sub_groups_a_case_created_are_destroyed_after_it(tmp_path: Path) -> None:
    write_files(tmp_path, **{"test_groups.py": """
        import pytest, torch, torch.distributed as td
        from torch.distributed import distributed_c10d as c10d

        @pytest.mark.dmlbench(world_size=2)
        def test_1_creates_a_group(dist):
            group = td.new_group([0, 1])
            td.all_reduce(torch.ones(1), group=group)
            assert len(c10d._world.pg_map) == 2

        @pytest.mark.dmlbench(world_size=2)
        def test_2_sees_only_the_default_group(dist):
            assert list(c10d._world.pg_map) == [c10d._get_default_group()]
    """})
    result = run_pytest(tmp_path, "--dmlbench", "-v", "-p", "no:randomly")
    assert result.returncode == 0, result.output


MIXED = """
    import pytest

    @pytest.mark.dmlbench(world_size=2)
    def test_skip_on_one_rank(dist):
        if dist.rank == 1:
            pytest.skip("only here")

    @pytest.mark.dmlbench(world_size=2)
    def test_xfail_on_one_rank(dist):
        if dist.rank == 0:
            pytest.xfail("flaky here")

    @pytest.mark.dmlbench(world_size=2)
    def test_fail_on_one_rank(dist):
        assert dist.rank == 0
"""


def test_mixed_outcomes_name_each_rank_and_what_to_do(tmp_path: Path) -> None:
    write_files(tmp_path, **{"test_mixed.py": MIXED})
    result = run_pytest(tmp_path, "--dmlbench", "-p", "no:randomly")
    assert result.returncode == 1, result.output
    result.lines.fnmatch_lines(["*3 failed*"])
    assert "distributed case  of" not in result.output
    text = " ".join(result.output.split())
    for expected in (
        "*rank 0 passed, rank 1 skipped ('only here'). A distributed case must reach the same outcome on every "
        "rank: call pytest.skip() or pytest.xfail() on every rank*",
        "*rank 0 xfailed ('flaky here'), rank 1 passed. A distributed case must reach the same outcome*",
        "*rank 0 passed, rank 1 failed. A case fails when it fails on any rank*",
    ):
        assert fnmatch.fnmatchcase(text, expected), (expected, result.output)


def _unguarded_leak(marker: str) -> str:
    # A module attribute: not something the state guard restores, so only a new world clears it.
    return f"""
        import os
        import pytest, torch

        @pytest.mark.dmlbench({marker})
        def test_1_leaks(dist):
            torch.LEAKED_BY_A_CASE = os.getpid()

        @pytest.mark.dmlbench({marker})
        def test_2_sees_no_leak(dist):
            assert not hasattr(torch, "LEAKED_BY_A_CASE")
    """


def test_fresh_isolation_gives_each_case_a_new_world(tmp_path: Path) -> None:
    write_files(tmp_path, **{
        "test_fresh.py": _unguarded_leak('world_size=2, isolation="fresh"'),
        "test_persistent_negative_control.py": _unguarded_leak("world_size=2"),
    })
    result = run_pytest(tmp_path, "--dmlbench", "-v", "-p", "no:randomly")
    assert result.returncode == 1, result.output
    result.lines.fnmatch_lines([
        "*test_fresh.py::test_2_sees_no_leak PASSED*",
        "*test_persistent_negative_control.py::test_2_sees_no_leak FAILED*",
        "*1 failed, 3 passed*",
    ])


def test_the_isolation_option_applies_to_every_case(tmp_path: Path) -> None:
    write_files(tmp_path, **{"test_x.py": _unguarded_leak("world_size=2")})
    result = run_pytest(tmp_path, "--dmlbench", "--dmlbench-isolation", "fresh", "-p", "no:randomly")
    assert result.returncode == 0, result.output
    write_files(tmp_path, **{"pytest.ini": "[pytest]\ndmlbench_isolation = fresh\n"})
    result = run_pytest(tmp_path, "--dmlbench", "-p", "no:randomly")
    assert result.returncode == 0, result.output


@pytest.mark.parametrize(
    ("args", "files", "message"),
    [
        (("--dmlbench-isolation", "sometimes"), {},
         "*--dmlbench-isolation: 'sometimes' is not an isolation; choose one of persistent, fresh*"),
        ((), {"pytest.ini": "[pytest]\ndmlbench_isolation = never\n"},
         "*--dmlbench-isolation: 'never' is not an isolation; choose one of persistent, fresh*"),
        ((), {"test_x.py": "import pytest\n@pytest.mark.dmlbench(isolation='new')\ndef test_x(dist):\n    pass\n"},
         "*test_x.py::test_x: isolation=: 'new' is not an isolation; choose one of persistent, fresh*"),
    ],
    ids=["option", "ini", "marker"],
)
def test_a_bad_isolation_is_a_usage_error(tmp_path: Path, args: tuple[str, ...], files: dict[str, str],
                                          message: str) -> None:
    write_files(tmp_path, **files)
    result = run_pytest(tmp_path, "--dmlbench", *args)
    assert result.returncode == pytest.ExitCode.USAGE_ERROR, result.output
    result.lines.fnmatch_lines([message])
