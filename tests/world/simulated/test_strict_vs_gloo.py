"""The bugs of ``strict_cases.py`` side by side in one pytest run of three columns: forked gloo ranks, simulated
ranks as before (the marker's ``strict=False``) and simulated ranks in strict mode (``--dmlbench-strict on``).

gloo passes the race (a tensor changed under an ``isend``) and hangs on both deadlocks until the case's timeout
(2 s here): its blocking send of a small tensor waits for the receive, and the report is a timeout, not the
cycle. Simulated ranks as before pass all three (sends buffered, async work finished at the call). Strict mode
fails each at once with its report: the rank, the call, the line, every rank of a cycle."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from tests.conftest import run_pytest, write_files
from tests.world.simulated import strict_cases

INNER = """
    import pytest
    from strict_cases import BUGS

    LAUNCHERS = [pytest.param("gloo", marks=pytest.mark.dmlbench(world_size=2, timeout=2)),
                 pytest.param("simulated", marks=pytest.mark.dmlbench(world_size=2, launcher="simulated",
                                                                      strict=False)),
                 pytest.param("strict", marks=pytest.mark.dmlbench(world_size=2, launcher="simulated"))]

    @pytest.mark.parametrize("launcher", LAUNCHERS)
    @pytest.mark.parametrize("bug", list(BUGS))
    def test_bug(dist, bug, launcher):
        BUGS[bug](dist.rank, dist.world_size)
"""


def test_gloo_passes_the_race_and_hangs_on_the_deadlocks_strict_mode_reports_each_at_once(tmp_path: Path) -> None:
    write_files(tmp_path, **{"test_bugs.py": INNER})
    shutil.copy(strict_cases.__file__, tmp_path / "strict_cases.py")
    result = run_pytest(tmp_path, "--dmlbench", "--dmlbench-strict", "on", "-v", "-p", "no:randomly",
                        "--dmlbench-json", "results.json")
    assert result.returncode == 1, result.output
    # the run says it is strict, at its start and in its results (test_simulated_e2e.py: off when not asked for)
    result.lines.fnmatch_lines(["dmlbench: strict mode on for cases on simulated ranks (launcher=\"simulated\"); "
                                "forked and Ray ranks run the real backend"])
    assert json.loads((tmp_path / "results.json").read_text())["run"]["strict"] is True
    result.lines.fnmatch_lines(["*test_bug[[]race after isend-gloo[]] PASSED*"])
    for bug in ("send/send deadlock", "pipeline micro-batch order"):
        result.lines.fnmatch_lines([f"*test_bug[[]{bug}-gloo[]] FAILED*"])
    for bug in strict_cases.BUGS:
        result.lines.fnmatch_lines([f"*test_bug[[]{bug}-simulated[]] PASSED*"])
        result.lines.fnmatch_lines([f"*test_bug[[]{bug}-strict[]] FAILED*"])
    result.lines.fnmatch_lines([
        "*PendingTensorAccess: strict mode: rank 0 wrote a tensor (float32[[]4]) in TensorBase.add_ before wait() on "
        "send to rank 1 (tag 0, float32[[]4]) on the default group (issued at *strict_cases.py:*",
    ])
    result.lines.fnmatch_lines([
        "*strict mode: deadlock, a cycle of 2 ranks each blocked in a point-to-point call that only the next can "
        "match (1 -> 0 -> 1): rank 1: send to rank 0 (tag 0, float32[[]4]); rank 0: send to rank 1 (tag 0, *",
    ])
    result.lines.fnmatch_lines([
        "*strict mode: deadlock, a cycle of 2 ranks * (1 -> 0 -> 1): rank 1: recv from rank 0 (tag 1, float32[[]4]); "
        "rank 0: send to rank 1 (tag 0, float32[[]4])*",
    ])
    for bug in ("send/send deadlock", "pipeline micro-batch order"):  # gloo hangs on each until the timeout
        result.lines.fnmatch_lines([f"*_ test_bug[[]{bug}-gloo[]] _*",
                                    "*distributed case timed out after 2 s on 2 rank(s) (gloo)*"])
    assert "5 failed, 4 passed" in result.output
