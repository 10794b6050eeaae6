"""Cases run on every rank of a persistent world: arguments, introspection, seeding, scaling, output."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.conftest import run_pytest, write_files

ISSUE_EXAMPLE = """
    import pytest, torch, torch.distributed as td

    @pytest.mark.dmlbench
    @pytest.mark.parametrize("n", [1, 1000])
    def test_all_reduce_sums(dist, n):
        x = torch.full((n,), float(dist.rank))
        td.all_reduce(x)
        assert torch.all(x == sum(range(dist.world_size)))
"""


def test_the_first_example_passes_on_four_ranks(tmp_path: Path) -> None:
    write_files(tmp_path, **{"test_example.py": ISSUE_EXAMPLE})
    result = run_pytest(tmp_path, "--dmlbench", "--world-size", "4", "-v")
    assert result.returncode == 0, result.output
    result.lines.fnmatch_lines(["*test_all_reduce_sums?1? PASSED*", "*test_all_reduce_sums?1000? PASSED*",
                                "*2 passed*"])


def test_negative_control_a_wrong_expectation_fails_on_every_rank(tmp_path: Path) -> None:
    wrong = ISSUE_EXAMPLE.replace("sum(range(dist.world_size))", "dist.world_size")
    write_files(tmp_path, **{"test_example.py": wrong})
    result = run_pytest(tmp_path, "--dmlbench", "--world-size", "4")
    assert result.returncode == 1
    result.lines.fnmatch_lines(["*distributed case failed on rank(s) 0, 1, 2, 3 of 4 (gloo)*", "*2 failed*"])


def test_assertion_introspection_is_labelled_by_rank(tmp_path: Path) -> None:
    write_files(tmp_path, **{"test_x.py": """
        import pytest

        @pytest.mark.dmlbench
        def test_compare(dist):
            expected = [0, 1, 2, 3]
            got = [0, 1, dist.rank, 3] if dist.rank == 2 else expected
            if dist.rank == 2:
                got = [0, 1, 20, 3]
            assert got == expected
    """})
    result = run_pytest(tmp_path, "--dmlbench", "--world-size", "4")
    assert result.returncode == 1
    result.lines.fnmatch_lines([
        "distributed case failed on rank(s) 2 of 4 (gloo)",
        "[[]rank 2[]] failed:",
        "*assert got == expected",
        "AssertionError: assert [0, 1, 20, 3] == [0, 1, 2, 3]",
        "*At index 2 diff: 20 != 2*",
    ])


def test_fixtures_and_parameters_reach_the_ranks(tmp_path: Path) -> None:
    write_files(tmp_path, **{
        "conftest.py": """
            import pytest

            @pytest.fixture
            def settings(tmp_path):
                return {"lr": 0.5, "folder": tmp_path}
        """,
        "test_x.py": """
            import pytest

            @pytest.mark.dmlbench(world_size=2)
            @pytest.mark.parametrize("transform", [lambda v: v * 2], ids=["double"])
            @pytest.mark.parametrize("size", [3, 5])
            def test_args(dist, settings, transform, size):
                assert settings["lr"] == 0.5 and settings["folder"].exists()
                assert transform(size) == 2 * size
                (settings["folder"] / f"rank{dist.rank}").write_text(str(size))
        """,
    })
    result = run_pytest(tmp_path, "--dmlbench", "-v")
    assert result.returncode == 0, result.output
    result.lines.fnmatch_lines(["*test_args?3-double? PASSED*", "*test_args?5-double? PASSED*"])


def test_unpicklable_fixture_values_are_named(tmp_path: Path) -> None:
    write_files(tmp_path, **{"test_x.py": """
        import threading, pytest

        @pytest.fixture
        def lock():
            return threading.Lock()

        @pytest.mark.dmlbench
        def test_lock(dist, lock):
            pass
    """})
    result = run_pytest(tmp_path, "--dmlbench")
    assert result.returncode == 1
    result.lines.fnmatch_lines(
        ["*fixture 'lock' (a lock) cannot be sent to the rank processes*build the object inside the case body*"]
    )


def test_worlds_persist_and_rng_is_seeded_per_case_and_rank(tmp_path: Path) -> None:
    write_files(tmp_path, **{"test_x.py": """
        import os, random, pytest, torch

        @pytest.mark.dmlbench(world_size=2)
        @pytest.mark.parametrize("i", [0, 1])
        def test_record(dist, i):
            t, p = torch.rand(1).item(), random.random()
            print(f"case{i} rank{dist.rank} pid={os.getpid()} torch={t:.6f} py={p:.6f}")
    """})
    runs = [run_pytest(tmp_path, "--dmlbench", "-rP") for _ in range(2)]
    for run in runs:
        assert run.returncode == 0, run.output

    def records(output: str) -> dict[str, tuple[str, str, str]]:
        found = {}
        for line in output.splitlines():
            if line.startswith("case"):
                key, rank, pid, t, p = line.split()
                found[f"{key}-{rank}"] = (pid, t, p)
        return found

    first, second = records(runs[0].output), records(runs[1].output)
    assert len(first) == 4
    # The same world serves both cases: rank r keeps its process.
    assert first["case0-rank0"][0] == first["case1-rank0"][0]
    assert first["case0-rank1"][0] == first["case1-rank1"][0]
    # Deterministic across runs, different across ranks and across cases.
    assert {k: v[1:] for k, v in first.items()} == {k: v[1:] for k, v in second.items()}
    assert first["case0-rank0"][1] != first["case0-rank1"][1]
    assert first["case0-rank0"][1] != first["case1-rank0"][1]


def test_scaling_parametrizes_world_sizes(tmp_path: Path) -> None:
    write_files(tmp_path, **{"test_x.py": """
        import pytest

        @pytest.mark.dmlbench(scaling=True)
        def test_scale(dist):
            print("ws", dist.world_size)
    """})
    result = run_pytest(tmp_path, "--dmlbench", "--world-size", "4", "-v")
    assert result.returncode == 0, result.output
    result.lines.fnmatch_lines(["*test_scale?ws1? PASSED*", "*test_scale?ws2? PASSED*", "*test_scale?ws4? PASSED*"])


def test_skip_and_xfail_inside_the_body(tmp_path: Path) -> None:
    write_files(tmp_path, **{"test_x.py": """
        import pytest

        @pytest.mark.dmlbench
        def test_skips(dist):
            pytest.skip("needs a bigger model")

        @pytest.mark.dmlbench
        def test_xfails(dist):
            pytest.xfail("known gap")
    """})
    result = run_pytest(tmp_path, "--dmlbench", "-rsx")
    assert result.returncode == 0, result.output
    result.lines.fnmatch_lines(["*needs a bigger model*", "*known gap*", "*1 skipped, 1 xfailed*"])


@pytest.mark.parametrize("workers", ["2"])
def test_under_xdist_each_worker_has_its_own_worlds(tmp_path: Path, workers: str) -> None:
    ranks = (os.cpu_count() or 1) // int(workers) + 1  # oversubscribed on any host: one warning, not one per worker
    write_files(tmp_path, **{"test_x.py": """
        import pytest, torch, torch.distributed as td

        @pytest.mark.dmlbench
        @pytest.mark.parametrize("i", range(6))
        def test_sum(dist, i):
            x = torch.tensor([float(i)])
            td.all_reduce(x)
            assert x.item() == i * dist.world_size
    """})
    result = run_pytest(tmp_path, "--dmlbench", "--world-size", str(ranks), "-n", workers)
    assert result.returncode == 0, result.output
    result.lines.fnmatch_lines(["*6 passed*"])
    warnings = [line for line in result.output.splitlines() if "oversubscribed" in line]
    assert len(warnings) == 1, warnings
    assert f"{ranks} rank(s) x 2 worker(s) > " in warnings[0]


def test_class_methods_and_parametrized_fixtures(tmp_path: Path) -> None:
    write_files(tmp_path, **{"test_x.py": """
        import pytest, torch, torch.distributed as td

        @pytest.fixture(params=[2, 3])
        def size(request):
            return request.param

        class TestGroup:
            @pytest.mark.dmlbench
            def test_method(self, dist, size):
                x = torch.ones(size)
                td.all_reduce(x)
                assert x.sum().item() == size * dist.world_size

        @pytest.mark.dmlbench(world_size=1)
        def test_single(dist):
            assert dist.is_main and dist.world_size == 1
    """})
    result = run_pytest(tmp_path, "--dmlbench", "-v")
    assert result.returncode == 0, result.output
    result.lines.fnmatch_lines(["*TestGroup::test_method?2? PASSED*", "*TestGroup::test_method?3? PASSED*",
                                "*test_single PASSED*"])
