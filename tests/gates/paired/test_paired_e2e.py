"""The paired gate end to end, in a real git repository: REF committed, the change in the working tree."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from importlib.metadata import entry_points
from pathlib import Path

import pytest

from tests.conftest import run_pytest, write_files
from tests.gates.paired.gitrepo import commit_all, git, make_repo, user_state

WIDE = "1000"  # terminal columns: each verdict message on one line, to be matched whole
# blocks of the minimum 5 rounds (of 10-25 ms steps) rather than 0.2 s: the verdicts rest on 2.5x changes
# against 50 % thresholds, which 5-round block medians show as surely
SHORT_BLOCKS = ("--dmlbench-block-seconds", "0.05")

# These tests check the gate's plumbing, not the machine's noise: cases carry a 50 % threshold and the
# injected slowdown is 2.5x, so neither a loaded machine nor a quiet one can flip a verdict.
LIB_REF = """
    import time

    SLOW = 1.0
    WIDTH = 8

    def busy(seconds):  # sleeps: the verdicts must not depend on how loaded the machine's cores are
        time.sleep(seconds)

    def slowed_step():
        busy(0.01 * SLOW)
"""
CASES_REF = """
    import os
    import pytest
    import torch
    import lib

    THRESHOLD = float(os.environ.get("CASE_THRESHOLD", "50"))

    @pytest.mark.dmlbench(world_size=2, threshold=THRESHOLD)
    def test_same(dist, dmlbench):
        dmlbench(lib.busy, 0.01)

    @pytest.mark.dmlbench(world_size=2, threshold=THRESHOLD)
    def test_slowed(dist, dmlbench):
        dmlbench(lib.slowed_step)

    @pytest.mark.dmlbench(world_size=2, threshold=THRESHOLD)
    def test_bytes(dist, dmlbench):
        from pytest_dmlbench.strategies import build

        strategy = build("allreduce", torch.nn.Linear(lib.WIDTH, 2), lr=0.1)
        batch = (torch.randn(8, lib.WIDTH), torch.randint(0, 2, (8,)))

        def step(inputs, targets, loss_fn):  # a step of about 10 ms keeps the blocks' round counts small
            lib.busy(0.01)
            return strategy.step(inputs, targets, loss_fn)

        dmlbench.train(step, [batch], global_batch_size=16, loss_fn=torch.nn.functional.cross_entropy)
"""
ONLY_REF = """
    @pytest.mark.dmlbench(world_size=2)
    def test_removed(dist, dmlbench):
        dmlbench(lib.busy, 0.001)
"""
ONLY_WORKING_TREE = """
    @pytest.mark.dmlbench(world_size=2)
    def test_new(dist, dmlbench):
        dmlbench(lib.busy, 0.001)
"""


# Each block server (the process given the paired channel) writes which plugins it runs with, where asked.
SERVER_PLUGINS = """
    import json, os, pathlib

    def pytest_configure(config):
        folder = os.environ.get("SERVER_PLUGINS_SEEN")
        if folder and os.environ.get("DMLBENCH_PAIRED_FDS"):
            names = sorted(name for name, plugin in config.pluginmanager.list_name_plugin() if plugin is not None)
            pathlib.Path(folder, f"{os.getpid()}.json").write_text(json.dumps(names))
"""  # no word of that library in it: the inner runs block its plugin only where no file of the folder names it


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    repo = make_repo(tmp_path_factory.mktemp("paired") / "repo", **{
        "lib.py": LIB_REF, "test_cases.py": CASES_REF + ONLY_REF, "pytest.ini": "[pytest]\n",
        "conftest.py": SERVER_PLUGINS, "seen_plugin.py": "# a plugin the paired run loads with -p\n",
    })
    write_files(repo, **{  # the change under test: uncommitted, as a developer has it
        "lib.py": LIB_REF.replace("SLOW = 1.0", "SLOW = 2.5").replace("WIDTH = 8", "WIDTH = 16"),
        "test_cases.py": CASES_REF + ONLY_WORKING_TREE,
    })
    return repo


def test_paired_run_judges_each_case_against_ref(project: Path) -> None:
    before = user_state(project)
    junit = project.parent / "junit.xml"
    results_json = project.parent / "results.json"
    seen = project.parent / "server-plugins"
    seen.mkdir()
    run = run_pytest(project, "-p", "seen_plugin", "--dmlbench", "--dmlbench-against", "HEAD", "--junitxml",
                     str(junit), "--dmlbench-json", str(results_json), *SHORT_BLOCKS, timeout=900, COLUMNS=WIDE,
                     SERVER_PLUGINS_SEEN=str(seen))
    assert run.returncode == 1, run.output
    # this run blocks Hypothesis's plugin (-p no:hypothesispytest, as every inner run of these tests that does not
    # use it): both block servers run without it too, where it is installed and would load otherwise; and it loads
    # a plugin of the repository's (-p seen_plugin), which both load too
    assert "hypothesispytest" in {entry.name for entry in entry_points(group="pytest11")}
    servers = [json.loads(path.read_text()) for path in seen.glob("*.json")]
    assert len(servers) == 2 and all({"dmlbench", "seen_plugin"} <= set(names) for names in servers), servers
    assert not [names for names in servers if "hypothesispytest" in names], servers
    assert user_state(project) == before  # REF ran from its own worktree; nothing of the user's changed
    run.lines.fnmatch_lines([
        "*step_time_s regressed against REF HEAD (*): * ms -> * ms, x* slower; threshold 50 %; "
        "ratio * ?*% CI *? (A/B in the bad direction), one-sided paired t-test p=* (H1: working tree worse) over "
        "* block pairs, alpha *; per-pair noise *%; first stage of * block pairs: ratio *, confirmed yes by the "
        "second stage at alpha * (the run-level rule)*",
        "Reproduce: pytest --dmlbench --world-size 2 --dmlbench-backend gloo --dmlbench-against * "
        "test_cases.py::test_slowed",
    ])
    # 8 -> 16 inputs: (16*2 + 2) / (8*2 + 2) floats of gradient, exactly, with no test needed
    run.lines.fnmatch_lines(["*comm_bytes_per_step regressed against REF HEAD (*): 72 B -> 136 B, +88.9 % larger; "
                             "threshold 50 %; an exact count, compared exactly*"])
    run.lines.fnmatch_lines([
        "*= dmlbench gate =*",
        "test_cases.py::test_same: step_time_s unchanged*block pairs *",
        "test_cases.py::test_slowed: step_time_s regression x* slower*block pairs *+*",
        "test_cases.py::test_bytes:*comm_bytes_per_step regression +88.9 % larger*",
        "test_cases.py::test_new: *step_time_s new*(new: not in REF)",
        "removed: 1 case(s) REF has and the working tree does not:",
        "  test_cases.py::test_removed",
    ])
    results = {case.get("name"): case for case in ET.parse(junit).iter("testcase")}
    assert set(results) == {"test_same", "test_slowed", "test_bytes", "test_new"}
    failed = {name for name, case in results.items() if case.find("failure") is not None}
    assert failed == {"test_slowed", "test_bytes"}
    failure = results["test_slowed"].find("failure")
    assert failure is not None and "step_time_s regressed against REF" in failure.get("message", "")
    # a passing case keeps its paired verdicts in the results JSON (no stored-baseline pass replaces them)
    saved = {case["nodeid"].split("::")[-1]: case for case in json.loads(results_json.read_text())["cases"]}
    same = {v["metric"]: v for v in saved["test_same"]["verdicts"]}
    assert same["step_time_s"]["kind"] == "unchanged" and "against REF HEAD" in same["step_time_s"]["message"]
    # one estimate in one message: the printed change, the ratio and its interval (REF's block median moved by
    # the paired ratio is the working tree's figure, so the table's columns give the printed change too)
    slowed = {v["metric"]: v for v in saved["test_slowed"]["verdicts"]}["step_time_s"]
    assert slowed["current_median"] / slowed["baseline_median"] == pytest.approx(slowed["paired"]["estimate"])
    assert f"x{slowed['paired']['estimate']:.3g} slower" in slowed["message"], slowed["message"]


def test_negative_control_the_same_change_passes_under_a_threshold_it_does_not_reach(project: Path) -> None:
    """The failures above come from the gate's rule: with thresholds beyond the changes, the same runs pass.
    A run whose block servers served without a problem leaves none of their logs or worlds behind (the
    failing runs below keep the logs their messages name)."""
    scratch = project.parent / "negative-control-tmp"
    scratch.mkdir()
    run = run_pytest(project, "--dmlbench", "--dmlbench-against", "HEAD", "-k", "slowed or bytes", *SHORT_BLOCKS,
                     timeout=900,
                     CASE_THRESHOLD="1000", COLUMNS=WIDE, TMPDIR=str(scratch))
    assert run.returncode == 0, run.output
    run.lines.fnmatch_lines(["test_cases.py::test_slowed: step_time_s unchanged x* slower*",
                             "test_cases.py::test_bytes:*comm_bytes_per_step unchanged +88.9 % larger*"])
    assert not [path.name for path in scratch.iterdir() if path.name.startswith("dmlbench-")], run.output


def test_saved_baselines_record_their_commit_and_baseline_re_measures_it(project: Path) -> None:
    import json
    import subprocess

    store = project.parent / "stored"
    saved = run_pytest(project, "--dmlbench", "-k", "same", "--dmlbench-save", "--dmlbench-baseline-dir", str(store))
    assert saved.returncode == 0, saved.output
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=project, capture_output=True, text=True).stdout.strip()
    files = list(store.glob("*/*/*.json"))
    assert [json.loads(f.read_text())["run"]["commit"] for f in files] == [head]
    run = run_pytest(project, "--dmlbench", "-k", "same", "--dmlbench-against", "baseline",
                     "--dmlbench-baseline-dir", str(store), timeout=600, COLUMNS=WIDE)
    assert run.returncode == 0, run.output
    # the baseline dir outside the repository makes pytest take their common parent as rootdir
    run.lines.fnmatch_lines([f"REF baseline ({head[:12]}): *", "*test_cases.py::test_same: step_time_s unchanged*"])


@pytest.mark.parametrize(("args", "expected"), [
    (("--dmlbench-against", "no-such-ref"), "*--dmlbench-against: 'no-such-ref' names no commit*"),
    (("--dmlbench-against", "HEAD", "--dmlbench-save"), "*--dmlbench-against and --dmlbench-save do not go together*"),
    (("--dmlbench-against", "HEAD", "-n", "2"), "*--dmlbench-against does not run under pytest-xdist (-n)*"),
    (("--dmlbench-against", "baseline"), "*--dmlbench-against baseline: no baseline file(s) under * record no commit*"),
])
def test_bad_input_is_a_usage_error(project: Path, args: tuple[str, ...], expected: str) -> None:
    run = run_pytest(project, "--dmlbench", *args)
    assert run.returncode == 4, run.output
    run.lines.fnmatch_lines([f"ERROR: {expected}"])
    assert "Traceback" not in run.output and "During handling" not in run.output


def test_not_a_git_repository_is_a_usage_error(tmp_path: Path) -> None:
    write_files(tmp_path, **{"test_x.py": "def test_x():\n    pass\n"})
    run = run_pytest(tmp_path, "--dmlbench", "--dmlbench-against", "main", GIT_CEILING_DIRECTORIES=str(tmp_path.parent),
                     COLUMNS=WIDE)
    assert run.returncode == 4, run.output
    run.lines.fnmatch_lines(["ERROR: --dmlbench-against: * is not inside a git repository*"])


def test_ref_whose_plugin_is_too_old_gets_the_version_it_needs(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo", **{
        "test_x.py": "import pytest\n\n@pytest.mark.dmlbench\ndef test_x(dist):\n    pass\n",
        "pytest.ini": "[pytest]\n",
        # an earlier pytest-dmlbench in REF's tree (this repository tests itself): no paired server yet
        "pytest_dmlbench/__init__.py": "__version__ = '0.1.0'\n",
        "pytest_dmlbench/plugin.py": "",
    })
    git(repo, "rm", "-q", "-r", "pytest_dmlbench")
    commit_all(repo, "the plugin leaves the tree")
    run = run_pytest(repo, "--dmlbench", "--dmlbench-against", "HEAD~1", COLUMNS=WIDE)
    assert run.returncode == 4, run.output
    run.lines.fnmatch_lines([
        "ERROR: REF HEAD~1 (*) could not serve blocks: its pytest-dmlbench (0.1.0) has no paired server; "
        "--dmlbench-against needs paired protocol 1 (pytest-dmlbench 0.2.0 or later) on the REF side.*",
    ])


def test_ref_holding_the_plugin_serves_with_its_own_copy(tmp_path: Path) -> None:
    """This repository is a user too: when REF's tree holds pytest_dmlbench, B runs REF's copy."""
    import shutil

    import pytest_dmlbench

    repo = make_repo(tmp_path / "repo", **{
        "test_x.py": "import time, pytest\n\n@pytest.mark.dmlbench(world_size=2, threshold=50)\n"
                     "def test_x(dist, dmlbench):\n    dmlbench(time.sleep, 0.01)\n",
        "pytest.ini": "[pytest]\n",
    })
    shutil.copytree(Path(pytest_dmlbench.__file__).parent, repo / "pytest_dmlbench",
                    ignore=shutil.ignore_patterns("__pycache__"))
    commit = commit_all(repo, "the plugin in the tree")
    run = run_pytest(repo, "--dmlbench", "--dmlbench-against", "HEAD", timeout=600, COLUMNS=WIDE)
    assert run.returncode == 0, run.output
    run.lines.fnmatch_lines([
        f"REF HEAD ({commit[:12]}): worktree */.git/dmlbench-worktrees/{commit}, pytest-dmlbench "
        f"{pytest_dmlbench.__version__} from */.git/dmlbench-worktrees/{commit}/pytest_dmlbench/__init__.py",
        "test_x.py::test_x: step_time_s unchanged*",
    ])


REF_DIES_CONFTEST = """
    import os
    import pathlib
    import signal
    import threading

    import pytest

    @pytest.fixture
    def ref_dies():
        # the two block servers have DMLBENCH_PAIRED_FDS; REF's runs this conftest from REF's worktree, the
        # working tree's block server from the user's repository, which must keep serving
        serving = bool(os.environ.get("DMLBENCH_PAIRED_FDS"))
        if serving and pathlib.Path(__file__).parent != pathlib.Path(os.environ["USER_REPO"]):
            threading.Timer(0.5, os.kill, (os.getpid(), signal.SIGKILL)).start()
"""
REF_DIES_CASES = """
    import time
    import pytest

    @pytest.mark.dmlbench(world_size=2, threshold=50)
    def test_first(dist, dmlbench, ref_dies):
        dmlbench(time.sleep, 0.01)

    @pytest.mark.dmlbench(world_size=2, threshold=50)
    def test_second(dist, dmlbench):
        dmlbench(time.sleep, 0.01)
"""
REF_ALWAYS_DIES_CASES = """
    import time
    import pytest

    @pytest.mark.dmlbench(world_size=2, threshold=50)
    @pytest.mark.parametrize("i", range(4))
    def test_each(dist, dmlbench, ref_dies, i):
        dmlbench(time.sleep, 0.01)
"""


def test_ref_killed_mid_run_fails_its_case_and_a_restarted_ref_judges_the_next(tmp_path: Path) -> None:
    """B's pytest process is killed (SIGKILL) while it serves the first case's blocks: that case fails with
    B's output; B is restarted (its log kept) and the next case is judged as if nothing had happened."""
    repo = make_repo(tmp_path / "repo", **{"conftest.py": REF_DIES_CONFTEST, "test_x.py": REF_DIES_CASES,
                                          "pytest.ini": "[pytest]\n"})
    before = user_state(repo)
    run = run_pytest(repo, "--dmlbench", "--dmlbench-against", "HEAD", timeout=600, COLUMNS=WIDE,
                     USER_REPO=str(repo))
    assert run.returncode == 1, run.output
    assert user_state(repo) == before
    run.lines.fnmatch_lines([
        "*REF HEAD (*) could not serve blocks: its pytest process was killed by SIGKILL",
        "REF's pytest output (*), last part:*",
    ])
    run.lines.fnmatch_lines(["test_x.py::test_second: step_time_s unchanged *(REF HEAD (*) restarted after it "
                             "stopped serving (1 of 2))"])
    run.lines.fnmatch_lines(["FAILED test_x.py::test_first*", "*1 failed, 1 passed*"])
    assert "Traceback" not in run.output and "During handling" not in run.output


def test_a_ref_that_keeps_dying_is_restarted_twice_then_its_cases_fail(tmp_path: Path) -> None:
    """Every case kills B: two restarts, then the last case fails naming the first report."""
    repo = make_repo(tmp_path / "repo", **{"conftest.py": REF_DIES_CONFTEST, "test_x.py": REF_ALWAYS_DIES_CASES,
                                          "pytest.ini": "[pytest]\n"})
    run = run_pytest(repo, "--dmlbench", "--dmlbench-against", "HEAD", timeout=600, COLUMNS=WIDE,
                     USER_REPO=str(repo))
    assert run.returncode == 1, run.output
    killed = "could not serve blocks: its pytest process was killed by SIGKILL"
    run.lines.fnmatch_lines([f"FAILED test_x.py::test_each[[]{i}[]] - Failed: REF HEAD (*) {killed}" for i in range(3)]
                            + ["FAILED test_x.py::test_each[[]3[]] - Failed: REF HEAD (*) stopped serving earlier *",
                               "*4 failed*"])
    log_folder = Path(run.output.split("its pytest output is in ")[1].split()[0]).parent
    logs = sorted(path.name for path in log_folder.glob("*"))
    assert logs == ["ref-pytest.1.log", "ref-pytest.2.log", "ref-pytest.log"], logs  # no server's output lost
