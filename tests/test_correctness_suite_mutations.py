"""The correctness suite CI runs (``pytest --dmlbench --world-size 2 -m correctness``) fails on a broken strategy.

Each mutation in :mod:`tests.mutations` is loaded as a plugin into the README's correctness command, on a
selection of the equivalence cases; the same selection without a mutation passes (the control that shows
the failure comes from the mutation).
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tests.conftest import clean_env, python_m_pytest

ROOT = Path(__file__).resolve().parent.parent
SELECTION = "test_matches_single_process_reference_float64 and mlp and sgd and ({names})"
CORRECTNESS = ("--dmlbench", "--world-size", "2", "-m", "correctness", "bench_cases/test_equivalence.py")


def correctness_run(names: str, *extra: str) -> subprocess.CompletedProcess[str]:
    """The README's correctness command on the float64 mlp cases of the named strategies."""
    arguments = ["-p", "no:cacheprovider", *CORRECTNESS, "-q", "-k", SELECTION.format(names=names), *extra]
    return python_m_pytest(ROOT, arguments, clean_env(), timeout=600)


def test_the_selection_passes_without_a_mutation() -> None:
    run = correctness_run("allreduce or bucketed")
    assert run.returncode == 0, run.stdout + run.stderr
    assert "4 passed" in run.stdout, run.stdout


@pytest.mark.parametrize(("mutation", "names", "failure", "failed"), [
    pytest.param("wrong_average", "allreduce",
                 r"allreduce parameters vs single-process reference after step 1: \d+ of \d+ values differ beyond",
                 "2 failed", id="wrong-average"),
    pytest.param("dropped_bucket", "bucketed",
                 r"bucketed parameters after step 1 not bit-identical across ranks: rank 1 != rank 0",
                 "1 failed, 1 passed", id="dropped-bucket"),  # one rank has nothing to drop
])
def test_a_mutation_fails_the_correctness_command(mutation: str, names: str, failure: str, failed: str) -> None:
    run = correctness_run(names, "-p", f"tests.mutations.{mutation}")
    output = run.stdout + run.stderr
    assert run.returncode == 1, output
    assert failed in output, output
    pytest.LineMatcher(output.splitlines()).re_match_lines([f".*{failure}.*"])
