"""``--dmlbench-redraw-worlds N``: both block servers run a case's blocks on newly started worlds every N pairs
(and its warm-up blocks on fresh ones), recorded per pair; 0 keeps each server's world for the whole run."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from pytest_dmlbench.config import parse_redraw_worlds
from pytest_dmlbench.errors import ConfigError
from pytest_dmlbench.gates.paired.client import RefLaunch, RefProcess
from pytest_dmlbench.gates.paired.live_source import redraw_interval
from pytest_dmlbench.gates.paired.protocol import PROTOCOL_VERSION, Channel, Hello
from tests.conftest import run_pytest
from tests.gates.paired.conftest import NoOptionRun
from tests.gates.paired.one_case_run import paired_one_case

# rank 0 writes its process id once per run of the body, both sides into one file (REF's copy of the case
# lives in REF's worktree): a fresh world forks new rank processes
PID_CASE = """
    import os
    import time
    from pathlib import Path

    import pytest

    PIDS = Path(os.environ["PIDS_FILE"])


    @pytest.mark.dmlbench(world_size=2, threshold=50)
    def test_pid(dist, dmlbench):
        dmlbench(lambda: time.sleep(0.005))
        if dist.rank == 0:
            with PIDS.open("a") as out:
                out.write(f"{os.getpid()}\\n")
"""


def _paired_run(tmp_path: Path, *options: str) -> tuple[dict[str, Any], list[str]]:
    return paired_one_case(tmp_path, "test_pid.py", PID_CASE, "PIDS_FILE", *options)


@pytest.mark.parametrize("text, pairs", [("0", 0), (" 4 ", 4), (1, 1)])
def test_a_redraw_interval_is_a_whole_number_of_pairs(text: object, pairs: int) -> None:
    assert parse_redraw_worlds(text) == pairs


@pytest.mark.parametrize("text", ["-1", "often", "2.5"])
def test_a_bad_redraw_interval_names_the_option_and_the_form(text: object) -> None:
    with pytest.raises(ConfigError, match=r"--dmlbench-redraw-worlds: .* give an integer >= 0, e.g. "
                                          r"--dmlbench-redraw-worlds 4"):
        parse_redraw_worlds(text)


def test_a_bad_redraw_option_stops_the_run_before_any_world_starts(tmp_path: Path) -> None:
    run = run_pytest(tmp_path, "--dmlbench", "--dmlbench-redraw-worlds", "-3")
    assert run.returncode != 0
    run.lines.fnmatch_lines(["*--dmlbench-redraw-worlds: -3 is too small; give an integer >= 0*"])


def test_every_block_runs_on_a_new_world_when_worlds_are_redrawn_every_pair(tmp_path: Path) -> None:
    paired, pids = _paired_run(tmp_path, "--dmlbench-redraw-worlds", "1")
    pairs = sum(paired["pairs_per_stage"])
    assert pairs >= 4
    # the ordinary run's world, then per server a fresh world for the warm-up block and one for every pair
    # but the first, which follows the warm-up on its world
    assert len(pids) == 1 + 2 * (1 + pairs)
    assert len(set(pids)) == 1 + 2 * pairs, pids
    fresh = [flag for stage in paired["block_medians"] for flag in stage["fresh_world"]]
    assert fresh == [False] + [True] * (pairs - 1)


def test_worlds_are_kept_for_the_whole_run_by_default(no_option_run: NoOptionRun) -> None:
    """The negative control: without the option each server's blocks share one world (one process id each).
    (The run without options is shared with the other options' negative controls: conftest.py.)"""
    paired, pids = no_option_run["test_pid.py"]
    assert len(pids) == 1 + 2 * (1 + sum(paired["pairs_per_stage"]))
    assert len(set(pids)) == 3, pids
    assert all("fresh_world" not in stage for stage in paired["block_medians"])


def _served_hello(tmp_path: Path, side: str, **features: bool) -> RefProcess:
    """A server handle whose hello came over a real pipe, as a started server's does."""
    server = RefProcess(RefLaunch(worktree=tmp_path, repo_root=tmp_path, cwd=tmp_path, args=[],
                                  log_path=tmp_path / f"{side}.log", label=side, side=side))
    read_fd, write_fd = os.pipe()
    hello: Hello = {"type": "hello", "protocol": PROTOCOL_VERSION, "plugin_version": "0.2.0",
                    "plugin_file": "/old/__init__.py", "cases": []}
    if features:
        hello["redraws_worlds"] = features["redraws_worlds"]
    Channel(-1, write_fd).send(hello)
    os.close(write_fd)
    server.channel = Channel(read_fd, -1)
    server.wait_hello(timeout_s=5)
    return server


@pytest.mark.parametrize("ref_redraws, own_redraws", [(False, True), (True, False), (False, False)])
def test_a_server_that_cannot_redraw_keeps_the_worlds_and_says_which(tmp_path: Path, ref_redraws: bool,
                                                                      own_redraws: bool) -> None:
    """A server whose hello does not offer fresh worlds (a release before them, or the Ray launcher, whose
    actors no pool keeps) is never asked for one, by either side, and the case's notes name it."""
    servers = (_served_hello(tmp_path, "REF old", redraws_worlds=ref_redraws),
               _served_hello(tmp_path, "own", redraws_worlds=own_redraws))
    unable = "REF old" if not ref_redraws else "own"
    assert redraw_interval(2, servers) == (0, f"worlds kept, not redrawn: {unable} (pytest-dmlbench 0.2.0) "
                                              "cannot start fresh ones for its blocks")


def test_both_servers_that_can_redraw_are_asked_to(tmp_path: Path) -> None:
    """The positive control of the one above: both offer it, the gate redraws and notes nothing; at 0, never."""
    servers = (_served_hello(tmp_path, "REF", redraws_worlds=True), _served_hello(tmp_path, "own", redraws_worlds=True))
    assert redraw_interval(3, servers) == (3, None)
    assert redraw_interval(0, servers) == (0, None)
