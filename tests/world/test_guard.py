"""The state guard and the agreement rules, in-process (the end-to-end leaks are in test_isolation.py)."""

from __future__ import annotations

import os
import types
from collections.abc import Callable
from pathlib import Path

import pytest
import torch
import torch.distributed as dist

from pytest_dmlbench.measure import comm, torch_patches
from pytest_dmlbench.world.agreement import describe_outcome, mixed_outcomes, rebuild_reasons, unmatched_collectives
from pytest_dmlbench.world.guard import snapshot
from pytest_dmlbench.world.messages import RankOutcome


def _replace_all_reduce() -> None:
    dist.all_reduce = lambda *args, **kwargs: None  # type: ignore[assignment]


CHANGES: dict[str, tuple[Callable[[], object], str]] = {
    "grad": (lambda: torch.set_grad_enabled(False), "grad mode"),
    "anomaly": (lambda: torch.autograd.set_detect_anomaly(True, check_nan=False), "anomaly detection"),
    "dtype": (lambda: torch.set_default_dtype(torch.float64), "default dtype"),
    "threads": (lambda: torch.set_num_threads(torch.get_num_threads() + 1), "intra-op threads"),
    "deterministic": (lambda: torch.use_deterministic_algorithms(True, warn_only=True), "deterministic algorithms"),
    "matmul": (lambda: torch.set_float32_matmul_precision("medium"), "float32 matmul precision"),
    "environment": (lambda: os.environ.update(DMLBENCH_GUARD_TEST="1"), "environment variable DMLBENCH_GUARD_TEST"),
    "all_reduce": (_replace_all_reduce, "torch.distributed.all_reduce"),
}


@pytest.mark.parametrize("name", sorted(CHANGES))
def test_restore_puts_back_what_a_case_changed_and_names_it(name: str) -> None:
    change, label = CHANGES[name]
    before = snapshot()
    assert before.restore() == []  # negative control: nothing changed, nothing reported
    change()
    assert label in before.restore()
    again = snapshot()
    assert again.values == before.values and again.raw_environ == before.raw_environ
    assert dist.all_reduce is before.functions[0][1]["all_reduce"]


def test_inference_mode_left_open_is_left(tmp_path: Path) -> None:
    before = snapshot()
    mode = torch.inference_mode()
    mode.__enter__()
    assert "inference mode" in before.restore()
    assert not torch.is_inference_mode_enabled() and torch.is_grad_enabled()
    assert torch.ones(1, requires_grad=True).mul(2).requires_grad


def test_a_removed_working_directory_is_left(tmp_path: Path) -> None:
    before = snapshot()
    gone = tmp_path / "gone"
    gone.mkdir()
    os.chdir(gone)
    gone.rmdir()
    assert "working directory" in before.restore()
    assert os.getcwd() == before.cwd


def test_a_patch_left_installed_is_taken_off_and_named_with_its_installer() -> None:
    original = dist.all_reduce
    before = snapshot()
    with comm.instrument_collectives():
        pass
    assert before.restore() == []  # negative control: a patch restored by its installer is no finding
    block = comm.instrument_collectives()
    block.__enter__()  # a case that opened the counting block and never closed it
    try:
        found = before.restore()
        assert "torch.distributed.all_reduce (patched by pytest_dmlbench.measure.comm.instrument_collectives, " \
               "not restored)" in found
        assert "torch.distributed.all_reduce" not in found  # named once, by the registry, not again as a function
        assert dist.all_reduce is original
        assert not [patch for patch in torch_patches.installed() if patch.installer.endswith("instrument_collectives")]
    finally:
        block.__exit__(None, None, None)  # its own restore comes after the guard's: nothing left to do
    assert dist.all_reduce is original


def test_a_patch_left_installed_and_replaced_since_is_taken_off_too() -> None:
    owner = types.ModuleType("stand_in")
    owner.f = len  # type: ignore[attr-defined]
    standing = torch_patches.install(owner, "f", abs, by="tests.standing")  # before the snapshot: meant to stay
    before = snapshot()
    torch_patches.install(owner, "g", min, by="tests.left")
    owner.g = max  # type: ignore[attr-defined]
    try:
        assert before.restore() == ["stand_in.g (patched by tests.left, not restored, then replaced by builtins.max)"]
        assert "g" not in vars(owner) and owner.f is abs
    finally:
        torch_patches.restore(standing)


def _outcome(rank: int, status: str = "passed", collectives: int | None = 2, rebuild: str = "") -> RankOutcome:
    return RankOutcome(1, rank, status, message="why" if status != "passed" else "",  # type: ignore[arg-type]
                       collectives=collectives, rebuild=rebuild)


def test_unmatched_collectives_are_worded_per_rank() -> None:
    assert unmatched_collectives([_outcome(0, collectives=4), _outcome(1, collectives=3)]) == (
        "rank 0 issued 4 collectives, rank 1 issued 3: a collective was left unmatched")
    assert unmatched_collectives([_outcome(0, collectives=1), _outcome(1, collectives=0), _outcome(2, collectives=0)]
                                 ) == "rank 0 issued 1 collective, ranks 1, 2 issued 0: a collective was left unmatched"
    assert unmatched_collectives([_outcome(0), _outcome(1)]) == ""
    assert unmatched_collectives([_outcome(0, collectives=None), _outcome(1)]) == ""


def test_rebuild_reasons_group_ranks() -> None:
    outcomes = [_outcome(0, rebuild="destroyed"), _outcome(1, rebuild="destroyed"), _outcome(2)]
    assert rebuild_reasons(outcomes) == "ranks 0, 1: destroyed"
    assert rebuild_reasons([_outcome(0)]) == ""


def test_mixed_outcomes_need_two_statuses() -> None:
    assert mixed_outcomes([(0, "passed", "passed"), (1, "passed", "passed")]) == ""
    skipped = describe_outcome(_outcome(1, "skipped"), None, False)
    assert skipped == "skipped ('why')"
    text = mixed_outcomes([(0, "passed", "passed"), (1, "skipped", skipped)])
    assert text.startswith("the ranks reached different outcomes: rank 0 passed, rank 1 skipped ('why'). ")
    assert "pytest.skip() or pytest.xfail() on every rank" in text
    assert describe_outcome(None, "exit code 3", False) == "died (exit code 3)"
    assert describe_outcome(None, None, True) == "did not finish"
