"""Simulated ranks agree with gloo on bad arguments: the one list of ``semantics_cases.py`` runs on forked gloo
ranks and on simulated ranks, side by side in one pytest run, and every rank's error (type and message) is the
same on both; every rank of both worlds then goes on to a barrier, so a bad call leaves no rank waiting. The
negative control runs the simulated side with the gloo checks switched off (``gloo_checks``): the first bad
call then stalls the simulated world."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from tests.conftest import Outcome, run_pytest, write_files
from tests.world.simulated import semantics_cases

INNER = """
    import json, pathlib
    import pytest, torch.distributed as td
    from semantics_cases import CASES, outcome

    HERE = pathlib.Path(__file__).parent
    LAUNCHERS = [pytest.param("fork", marks=pytest.mark.dmlbench(world_size=2)),
                 pytest.param("simulated", marks=pytest.mark.dmlbench(world_size=2, launcher="simulated"))]

    @pytest.mark.parametrize("launcher", LAUNCHERS)
    def test_semantics(dist, launcher):
        got = {name: outcome(call, dist.rank, dist.world_size) for name, call in CASES.items()}
        td.barrier()  # every rank raised at its own call: none is left in a collective
        (HERE / f"{launcher}-{dist.rank}.json").write_text(json.dumps(got))
"""

CHECKS_OFF = """
    from pytest_dmlbench.world.simulated import gloo_checks

    for name in ("root", "reduction", "allgather", "allgather_into", "reduce_scatter_into", "reduce_scatter",
                 "alltoall", "alltoall_single", "scatter", "gather"):
        setattr(gloo_checks, name, lambda *args: None)
"""


def _records(folder: Path, launcher: str) -> list[dict[str, str]]:
    return [json.loads((folder / f"{launcher}-{rank}.json").read_text()) for rank in (0, 1)]


def _run(folder: Path, **extra: str) -> Outcome:
    write_files(folder, **{"test_semantics.py": INNER}, **extra)
    shutil.copy(semantics_cases.__file__, folder / "semantics_cases.py")
    return run_pytest(folder, "--dmlbench", "-p", "no:randomly", "-v")


def test_simulated_ranks_raise_what_gloo_raises_on_every_case(tmp_path: Path) -> None:
    result = _run(tmp_path)
    assert result.returncode == 0, result.output
    result.lines.fnmatch_lines(["*test_semantics[[]fork[]] PASSED*", "*test_semantics[[]simulated[]] PASSED*"])
    forked, simulated = _records(tmp_path, "fork"), _records(tmp_path, "simulated")
    for rank in (0, 1):
        assert set(forked[rank]) == set(semantics_cases.CASES)
        differ = {name: (forked[rank][name], simulated[rank][name]) for name in forked[rank]
                  if forked[rank][name] != simulated[rank][name]}
        assert not differ, f"rank {rank}: gloo vs simulated:\n" + "\n".join(
            f"{name}:\n  gloo:      {g}\n  simulated: {s}" for name, (g, s) in differ.items())
    assert forked[0]["recv without src returns the sender"] == "returned 1"
    raised = [name for name, got in forked[0].items() if not got.startswith("returned")]
    assert len(raised) == len(semantics_cases.CASES) - 1, forked[0]  # every case on rank 0 raises but the recv


def test_negative_control_without_the_gloo_checks_the_simulated_world_stalls(tmp_path: Path) -> None:
    """The first bad call (a wrong-size all_gather_into_tensor) then stalls the simulated world, as the issue
    found, where gloo raised on each rank; the stall reaches the report through ``outcome``'s ``except
    Exception`` (the world's abort is a BaseException)."""
    result = _run(tmp_path, **{"conftest.py": CHECKS_OFF})
    assert result.returncode == 1, result.output
    result.lines.fnmatch_lines(["*test_semantics[[]fork[]] PASSED*", "*test_semantics[[]simulated[]] FAILED*"])
    result.lines.fnmatch_lines(["distributed case on 2 rank(s) (simulated): no simulated rank can go on, *"
                                "rank 0: wait in all_gather_into_tensor(float32[[]2] -> float32[[]5]) #1 *"])
    assert not (tmp_path / "simulated-0.json").exists()
