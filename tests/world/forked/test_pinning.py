"""``--dmlbench-pin-cores``: each forked rank on one core, rank r of A's and REF's worlds on the same core;
refused where the figures would be stored or compared without it, and with launchers that place ranks."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from pytest_dmlbench.world.forked.pinning import core_for_rank, pin_this_rank, usable_cores
from tests.conftest import run_pytest, write_files
from tests.gates.paired.gitrepo import make_repo

# the case checks its own rank's affinity: one core, the rank's share of the cores the pytest process has
PINNED_CASE = """
    import os

    import pytest

    @pytest.fixture
    def cores():
        return sorted(os.sched_getaffinity(0))

    @pytest.mark.dmlbench(world_size=2)
    def test_rank_sits_on_its_core(dist, dmlbench, cores):
        expected = {cores[dist.rank % len(cores)]}
        assert os.sched_getaffinity(0) == expected, (dist.rank, os.sched_getaffinity(0), expected)
        dmlbench(lambda: sum(range(2000)))
"""


def test_ranks_map_onto_the_cores_in_turn() -> None:
    assert [core_for_rank(r, [3, 5]) for r in range(5)] == [3, 5, 3, 5, 3]
    with pytest.raises(ValueError, match="rank must be >= 0"):
        core_for_rank(-1, [0])
    with pytest.raises(ValueError, match="no cores"):
        core_for_rank(0, [])


def test_a_process_pins_itself() -> None:
    cores = usable_cores()
    pid = os.fork()
    if pid == 0:  # the child pins itself and reports through its exit code
        core = pin_this_rank(1, cores)
        os._exit(0 if os.sched_getaffinity(0) == {core} else 1)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    assert usable_cores() == cores  # the parent is untouched


@pytest.mark.skipif(len(usable_cores()) < 2, reason="one usable core: pinned and unpinned ranks sit alike")
def test_a_paired_run_pins_both_sides_ranks(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo", **{"test_pin.py": PINNED_CASE, "pytest.ini": "[pytest]\n"})
    # what is checked is each rank's affinity in every block, not the figure: the minimum of pairs (a budget of
    # 1 s stops the stage at 4) of the minimum of rounds (blocks of 0.05 s) runs blocks on both servers
    run = run_pytest(repo, "--dmlbench", "--dmlbench-against", "HEAD", "--dmlbench-pin-cores",
                     "--dmlbench-pair-budget", "1", "--dmlbench-block-seconds", "0.05", timeout=600)
    assert run.returncode == 0, run.output  # the ordinary run and every block of both servers were pinned
    run.lines.fnmatch_lines(["*step_time_s*"])
    # negative control: without the option the ranks may run anywhere, and the case says so
    loose = run_pytest(repo, "--dmlbench", "--dmlbench-no-compare", timeout=600)
    assert loose.returncode == 1, loose.output
    loose.lines.fnmatch_lines(["*assert*sched_getaffinity*"])


@pytest.mark.parametrize(("options", "problem"), [
    ((), "*--dmlbench-pin-cores changes the figures and stored baselines do not record it*"),
    (("--dmlbench-no-compare", "--dmlbench-save"), "*stored baselines do not record it*"),
    (("--dmlbench-no-compare", "--dmlbench-launcher", "simulated"), "*the simulated launcher places its ranks*"),
])
def test_pinning_where_it_cannot_hold_is_a_usage_error(tmp_path: Path, options: tuple[str, ...],
                                                       problem: str) -> None:
    write_files(tmp_path, **{"test_x.py": "def test_x():\n    pass\n"})
    run = run_pytest(tmp_path, "--dmlbench", "--dmlbench-pin-cores", *options)
    assert run.returncode == 4, run.output
    run.lines.fnmatch_lines([f"ERROR: {problem}"])
