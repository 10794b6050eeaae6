"""Simulated ranks through pytest itself: the launcher option, the marker, skipped measuring cases, faults
at 1024 ranks followed by a healthy case, and agreement with the forked world."""

from __future__ import annotations

import json
from pathlib import Path

import torch

from tests.conftest import clean_env, python_m_pytest, run_pytest, write_files

CASES = """
    import pytest, torch, torch.distributed as td
    from hypothesis import given, strategies as st

    @pytest.mark.dmlbench
    def test_sums(dist):
        x = torch.full((3,), float(dist.rank))
        td.all_reduce(x)
        assert torch.all(x == sum(range(dist.world_size)))
        assert dist.backend == "simulated" and td.get_world_size() == dist.world_size

    @pytest.mark.dmlbench
    def test_measures(dist, dmlbench):
        dmlbench(lambda: None)

    @pytest.mark.dmlbench
    @given(n=st.integers(1, 5))
    def test_property(dist, n):
        pass
"""


def test_the_launcher_runs_correctness_cases_and_skips_measuring_ones(tmp_path: Path) -> None:
    write_files(tmp_path, **{"test_cases.py": CASES})
    result = run_pytest(tmp_path, "--dmlbench", "--dmlbench-launcher", "simulated", "--world-size", "256", "-v",
                        "-rs", "--dmlbench-json", "results.json")
    assert result.returncode == 0, result.output
    result.lines.fnmatch_lines([
        "dmlbench: world size 256, backend auto, timeout 120 s, * core(s), launcher simulated",
        "dmlbench: simulated ranks (threads of this process, taking turns): correctness only, cases that measure "
        "are skipped; strict mode off",  # not asked for (test_strict_vs_gloo.py: asked for, on)
        "*test_sums PASSED*",
        "*test_measures SKIPPED*",
        "SKIPPED * measures timings (uses the dmlbench fixture): simulated ranks share one process and take turns, "
        "so their timings are not a real world's and are not judged; run it with --dmlbench-launcher fork or ray",
    ])
    result.lines.fnmatch_lines([
        "SKIPPED * a property-based (@given) case: its ranks agree on every example through a channel between "
        "rank processes, which simulated ranks (threads taking turns) do not provide; run it with "
        "--dmlbench-launcher fork",
    ])
    assert "Captured log" not in result.output
    assert json.loads((tmp_path / "results.json").read_text())["run"]["strict"] is False


MARKED = """
    import pytest, torch, torch.distributed as td

    @pytest.mark.dmlbench(world_size=64, launcher="simulated")
    def test_simulated(dist):
        assert td.get_backend() == "simulated" and td.get_world_size() == 64
        td.barrier()

    @pytest.mark.dmlbench
    def test_forked(dist):
        assert td.get_backend() == "gloo" and td.get_world_size() == 2

    @pytest.mark.dmlbench(launcher="ray")
    def test_ray(dist):
        pass
"""


def test_the_marker_chooses_simulated_ranks_per_case(tmp_path: Path) -> None:
    write_files(tmp_path, **{"test_cases.py": MARKED})
    result = run_pytest(tmp_path, "--dmlbench", "-v", "-rs")
    assert result.returncode == 0, result.output
    result.lines.fnmatch_lines([
        "*test_simulated PASSED*", "*test_forked PASSED*", "*test_ray SKIPPED*",
        "SKIPPED * the case asks for launcher 'ray' and the run uses 'fork': run it with --dmlbench-launcher ray",
    ])


FAULTS = """
    import pytest, torch, torch.distributed as td

    @pytest.mark.dmlbench
    def test_a_rank_fails(dist):
        td.barrier()
        assert dist.rank != 999, "wrong on rank 999"
        td.barrier()

    @pytest.mark.dmlbench
    def test_a_rank_skips_a_collective(dist):
        if dist.rank != 12:
            td.all_reduce(torch.ones(2))

    @pytest.mark.dmlbench
    def test_a_rank_calls_another_collective(dist):
        if dist.rank == 1023:
            td.barrier()
        else:
            td.all_reduce(torch.ones(2))

    @pytest.mark.dmlbench
    def test_healthy_afterwards(dist):
        x = torch.ones(1)
        td.all_reduce(x)
        assert x.item() == 1024
"""


def test_faults_at_1024_ranks_are_reported_and_the_next_case_runs(tmp_path: Path) -> None:
    write_files(tmp_path, **{"test_faults.py": FAULTS})
    result = run_pytest(tmp_path, "--dmlbench", "--dmlbench-launcher", "simulated", "--world-size", "1024", "-v",
                        COLUMNS="2000")
    assert result.returncode == 1
    result.lines.fnmatch_lines([
        "*test_a_rank_fails FAILED*",
        "*test_a_rank_skips_a_collective FAILED*",
        "*test_a_rank_calls_another_collective FAILED*",
        "*test_healthy_afterwards PASSED*",
    ])
    result.lines.fnmatch_lines([
        "*distributed case failed on rank(s) 999 of 1024 (simulated)*",
        "*AssertionError: wrong on rank 999*",
        "*[[]ranks 0-998, 1000-1023[]] still waiting (most likely in a collective) after rank 999 failed; their "
        "stack (the same on each):*",
        "*the ranks reached different outcomes: ranks 0-998, 1000-1023 did not finish, rank 999 failed.*",
    ])
    result.lines.fnmatch_lines([
        "*distributed case on 1024 rank(s) (simulated): no simulated rank can go on, a collective or receive "
        "cannot be matched: ranks 0-11, 13-1023: wait in all_reduce(SUM, float32?2?) #1 on the default group; "
        "rank 12: ended (no collective issued)*",
    ])
    result.lines.fnmatch_lines([
        "*distributed case on 1024 rank(s) (simulated): rank 1023 called barrier as collective #1 of the default "
        "group, where rank 0 called all_reduce(SUM, float32?2?). Every rank's last collective: *",
    ])
    result.lines.fnmatch_lines(["*3 failed, 1 passed*"])
    assert "Captured log" not in result.output  # torch's per-call debug log of 1023 released ranks


AGREEMENT = """
    import copy, os, pytest, torch, torch.distributed as td, torch.nn.functional as F
    from pytest_dmlbench.training import models
    from pytest_dmlbench.data import shard, synthetic_classification
    from pytest_dmlbench.training.reference import flat
    from pytest_dmlbench.strategies import build

    @pytest.mark.parametrize("name", ["ddp", "allreduce", "bucketed", "ps", "local_sgd"])
    @pytest.mark.parametrize("size", [pytest.param(n, marks=pytest.mark.dmlbench(world_size=n)) for n in (2, 4)])
    def test_train(dist, name, size):
        assert dist.world_size == size
        model = models.tiny_mlp(16, 32, 10, seed=0).to(torch.float64)
        strategy = build(name, model, lr=0.1, momentum=0.0 if name == "local_sgd" else 0.9)
        for step in range(3):
            batch = synthetic_classification(4 * strategy.data_world_size, (16,), 10, seed=100 + step,
                                             dtype=torch.float64)
            inputs, targets = (shard(batch, strategy.data_rank, strategy.data_world_size)
                               if strategy.data_rank is not None else (None, None))
            strategy.step(inputs, targets, F.cross_entropy)
        if dist.rank == dist.world_size - 1:
            torch.save(flat(strategy.model.parameters()),
                       os.path.join(os.environ["OUT"], f"{name}-{dist.world_size}.pt"))
"""
STRATEGIES = ["ddp", "allreduce", "bucketed", "ps", "local_sgd"]
# Where the forked world's gloo sums in another order than the rank-order fold (4 ranks): the bound the
# two launchers' float64 parameters after three steps are held to, relative to the parameters' size.
AGREEMENT_BOUND = 1e-14


def test_simulated_ranks_agree_with_the_forked_world(tmp_path: Path) -> None:
    write_files(tmp_path, **{"test_agree.py": AGREEMENT})
    for launcher in ("fork", "simulated"):  # one session a launcher: its cases pin world sizes 2 and 4
        out = tmp_path / launcher
        out.mkdir()
        result = run_pytest(tmp_path, "--dmlbench", "--dmlbench-launcher", launcher, OUT=str(out))
        assert result.returncode == 0, result.output
        result.lines.fnmatch_lines(["*10 passed*"])
    for name in STRATEGIES:
        for world_size in (2, 4):
            forked = torch.load(tmp_path / "fork" / f"{name}-{world_size}.pt")
            simulated = torch.load(tmp_path / "simulated" / f"{name}-{world_size}.pt")
            if world_size == 2:  # a sum of two is the same in either order: the same bits
                assert torch.equal(forked, simulated), name
            else:
                relative = float((forked - simulated).norm() / forked.norm())
                assert relative <= AGREEMENT_BOUND, (name, relative)


def test_the_fsdp2_and_tensor_parallel_equivalence_suite_passes_on_simulated_ranks() -> None:
    """The sharded strategies' float64 equivalence cases and their negative controls (a shard that skips its
    reduce-scatter, a wrong placement), unchanged, on 2 and 4 simulated ranks; only the two byte-accounting
    cases that time with the ``dmlbench`` fixture are skipped, with the reason."""
    root = Path(__file__).resolve().parents[3]
    for world_size in ("2", "4"):
        done = python_m_pytest(
            root, ["-p", "no:cacheprovider", "-p", "no:randomly", "-q", "-rs", "--dmlbench", "--dmlbench-launcher",
                   "simulated", "--world-size", world_size, "-m", "correctness",
                   "bench_cases/test_sharded_equivalence.py"], clean_env(), timeout=600)
        assert done.returncode == 0, done.stdout + done.stderr
        assert "32 passed, 2 skipped" in done.stdout, done.stdout
        assert "measures timings (uses the dmlbench fixture): simulated ranks" in done.stdout, done.stdout
