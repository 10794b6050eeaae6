"""Simulated ranks look like torchrun's processes to a script: torchrun's variables per rank, the world's group
adopted by ``init_process_group`` and kept by ``destroy_process_group``, ``run_script`` with each rank's argv,
output, exit status and rank, and a case whose ranks never used the group failing with that reason.

End to end, the torchrun-style script ``tests/world/data/torchrun_train.py`` gives the same losses on forked,
Ray and simulated ranks at world sizes 2 and 4 (one pytest run, every launcher), and on ranks torchrun launched
(pytest under torchrun at 2 and 4 processes); its variant that ignores the variables fails on simulated ranks
with the reason. Negative controls: without the per-rank variables the
script fails on ``RANK``; without the adoption its ``init_process_group`` is torch's "twice" error; without
the per-rank process state 64 ranks' argv and output mix.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import sys
import textwrap
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import torch
import torch.distributed as td

from pytest_dmlbench.world import adopt_group
from pytest_dmlbench.world.failure import failure_text
from pytest_dmlbench.world.scripts import ScriptRun, run_script
from pytest_dmlbench.world.simulated import process_state
from pytest_dmlbench.world.simulated.rank_environ import RankEnviron
from pytest_dmlbench.world.simulated.turns import WorldAborted
from tests import forkserver
from tests.conftest import Outcome, SharedSessions, clean_env, run_pytest, write_files
from tests.world.simulated.helpers import passed, simulate

SCRIPT = Path(__file__).parents[1] / "data" / "torchrun_train.py"

TRAINING = """
    import json, pathlib, re
    import pytest
    from pytest_dmlbench.world.scripts import run_script

    HERE = pathlib.Path(__file__).parent

    def launchers(size):
        return [pytest.param(launcher, marks=pytest.mark.dmlbench(world_size=size, launcher=launcher))
                for launcher in LAUNCHERS]

    def train(dist, launcher, *extra):
        out = HERE / f"{launcher}-{dist.world_size}"
        run = run_script(str(HERE / "torchrun_train.py"), "--out", str(out), *extra)
        assert run.rank == dist.rank
        losses = [float(m) for m in re.findall(rf"rank {dist.rank} local_rank {dist.rank} loss (\\S+)", run.output)]
        (out / f"losses-{dist.rank}.json").write_text(json.dumps(losses))

    @pytest.mark.parametrize("launcher", launchers(2))
    def test_ws2(dist, launcher):
        train(dist, launcher)

    @pytest.mark.parametrize("launcher", launchers(4))
    def test_ws4(dist, launcher):
        train(dist, launcher)

    @pytest.mark.dmlbench(world_size=2, launcher="simulated")
    def test_ignores_the_variables(dist):
        run_script(str(HERE / "torchrun_train.py"), "--out", str(HERE / "no-env"), "--no-env")
"""

NO_VARIABLES = """
    from pytest_dmlbench.world.simulated import as_torchrun

    as_torchrun.rank_variables = lambda *args: {}
"""


UNDER_TORCHRUN = """
    import json, pathlib, re
    import pytest
    from pytest_dmlbench.world.scripts import run_script

    HERE = pathlib.Path(__file__).parent

    @pytest.mark.dmlbench
    def test_under_torchrun(dist):
        out = HERE / f"torchrun-{dist.world_size}"
        run = run_script(str(HERE / "torchrun_train.py"), "--out", str(out))
        assert run.rank == dist.rank
        losses = [float(m) for m in re.findall(rf"rank {dist.rank} local_rank {dist.rank} loss (\\S+)", run.output)]
        (out / f"losses-{dist.rank}.json").write_text(json.dumps(losses))
"""

# a run on the forked launcher runs the fork and simulated cases and skips the Ray ones; a Ray run the Ray ones
LAUNCHERS = ("fork", "simulated", "ray")


def _training_run(folder: Path, *args: str, launchers: tuple[str, ...] = LAUNCHERS, **extra: str) -> Outcome:
    write_files(folder, **{"test_training.py": f"LAUNCHERS = {launchers!r}\n" + textwrap.dedent(TRAINING)},
                **extra)
    shutil.copy(SCRIPT, folder / SCRIPT.name)
    return run_pytest(folder, "--dmlbench", "-p", "no:randomly", "-v", *args, timeout=600)


def _under_torchrun(folder: Path, nproc: int) -> Any:
    """pytest launched by torchrun on ``nproc`` processes, each a rank of the launcher's world, running the
    script through ``run_script`` in a case that takes the launcher's world size."""
    write_files(folder, **{"test_under_torchrun.py": UNDER_TORCHRUN})
    shutil.copy(SCRIPT, folder / SCRIPT.name)
    env = clean_env()
    proc = subprocess.run(
        [forkserver.python(env), "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", str(nproc),
         "--log-dir", str(folder / f"torchrun-logs-{nproc}"),  # not a /tmp/torchelastic_* folder left behind
         "-m", "pytest", "-p", "no:cacheprovider", "-p", "no:randomly", "--dmlbench", "-v"],
        cwd=folder, capture_output=True, text=True, timeout=300, env=env)
    return Outcome(proc.returncode, proc.stdout + proc.stderr)


def _losses(folder: Path, world_size: int) -> list[list[float]]:
    return [json.loads((folder / f"losses-{rank}.json").read_text()) for rank in range(world_size)]


def _assert_trained_alike(forked_folder: Path, other_folder: Path, world_size: int, exact: bool) -> None:
    """Every rank of ``other_folder`` logged the forked ranks' losses and wrote their checkpoint."""
    forked, other = _losses(forked_folder, world_size), _losses(other_folder, world_size)
    assert len(forked[0]) == 6 and all(losses == forked[0] for losses in forked)
    assert all(losses == other[0] for losses in other), f"the ranks' losses differ in {other_folder.name}"
    assert other[0] == forked[0] if exact else other[0] == pytest.approx(forked[0], rel=1e-12), other_folder.name
    for rank in range(world_size):  # a checkpoint per rank, equal across ranks and launchers
        mine = torch.load(other_folder / f"checkpoint-rank{rank}.pt")
        theirs = torch.load(forked_folder / f"checkpoint-rank{rank}.pt")
        assert all(torch.allclose(mine[k], theirs[k], rtol=1e-12, atol=0) for k in mine), other_folder.name


def test_the_script_trains_alike_on_forked_and_simulated_ranks(shared_sessions: SharedSessions) -> None:
    result, folder = shared_sessions.get("torchrun-like-training", _training_run)
    for launcher in ("fork", "simulated"):
        for size in (2, 4):
            assert f"test_training.py::test_ws{size}[{launcher}] PASSED" in result.output, result.output
    for world_size in (2, 4):
        # a sum of two is the same in either order; of four, gloo's order and the simulated ranks' documented
        # left fold may differ in the last bits
        _assert_trained_alike(folder / f"fork-{world_size}", folder / f"simulated-{world_size}", world_size,
                              exact=world_size == 2)
    # the variant that ignores the variables: each rank trained alone, and the case says so
    result.lines.fnmatch_lines(["*_ test_ignores_the_variables _*",
                                "distributed case failed on rank(s) 0, 1 of 2 (simulated)", "",
                                "[[]ranks 0, 1] failed alike (rank 0's shown):",
                                "none of the 2 simulated ranks issued a collective or a point-to-point call: each "
                                "rank ran the case on its own*"])
    assert sorted(os.listdir(folder / "no-env")) == ["checkpoint-rank0.pt"]  # both ranks wrote one file
    result.lines.fnmatch_lines(["*1 failed, 4 passed, 2 skipped*"])


def test_the_script_trains_alike_on_ray_ranks(shared_sessions: SharedSessions, tmp_path: Path) -> None:
    """One Ray start for both world sizes; gloo's ranks on Ray sum as the forked ones do, exactly."""
    pytest.importorskip("ray", reason="the Ray launcher needs Ray: pip install 'pytest-dmlbench[ray]'")
    forked, folder = shared_sessions.get("torchrun-like-training", _training_run)
    result = _training_run(tmp_path, "--dmlbench-launcher", "ray", "-k", "ray")
    assert result.returncode == 0, result.output
    result.lines.fnmatch_lines(["*test_ws2[[]ray[]] PASSED*", "*test_ws4[[]ray[]] PASSED*"])
    for world_size in (2, 4):
        assert f"test_training.py::test_ws{world_size}[fork] PASSED" in forked.output, forked.output
        _assert_trained_alike(folder / f"fork-{world_size}", tmp_path / f"ray-{world_size}", world_size, exact=True)


@pytest.mark.parametrize("nproc", [2, 4])
def test_the_script_trains_alike_on_ranks_torchrun_launched(shared_sessions: SharedSessions, tmp_path: Path,
                                                            nproc: int) -> None:
    forked, folder = shared_sessions.get("torchrun-like-training", _training_run)
    assert f"test_training.py::test_ws{nproc}[fork] PASSED" in forked.output, forked.output
    result = _under_torchrun(tmp_path, nproc)
    assert result.returncode == 0 and "1 passed" in result.output, result.output
    _assert_trained_alike(folder / f"fork-{nproc}", tmp_path / f"torchrun-{nproc}", nproc, exact=True)


def test_negative_control_without_the_variables_the_script_does_not_train_distributed(tmp_path: Path) -> None:
    """Without its variables a simulated rank cannot tell it was launched: the script trains one model per rank
    (the issue's silent divergence) and ``run_script`` takes every rank for rank 0 (the issue's wrong blame)."""
    result = _training_run(tmp_path, "--dmlbench-launcher", "simulated", "-k", "ws2 and simulated",
                           launchers=("simulated",), **{"conftest.py": NO_VARIABLES})
    result.lines.fnmatch_lines(["*test_ws2[[]simulated[]] FAILED*", "distributed case failed on rank(s) 1 of 2 *",
                                "[[]rank 1] failed:", "*assert run.rank == dist.rank", "AssertionError: assert 0 == 1"])
    assert result.output.count("step 5 rank 0 local_rank 0 loss") >= 2  # both ranks trained, alone, as rank 0


# -- in process: each piece on its own ------------------------------------------------------------------------

def test_each_rank_reads_and_writes_its_own_environment() -> None:
    seen: dict[int, Any] = {}
    before = dict(os.environ)

    def body(info: Any) -> None:
        rank = str(info.rank)
        got = (os.environ["RANK"], os.environ.get("LOCAL_RANK"), os.getenv("WORLD_SIZE"), os.environ["GROUP_RANK"],
               "MASTER_ADDR" in os.environ, os.environ["TORCHELASTIC_USE_AGENT_STORE"])
        os.environ["MINE"] = rank
        del os.environ["ROLE_NAME"]
        td.barrier()  # every other rank writes and deletes its own in between
        child = subprocess.run([sys.executable, "-c", "import os; print(os.environ['RANK'], os.environ['MINE'])"],
                               capture_output=True, text=True, check=True).stdout.split()
        # torch.distributed's stubs do not re-export TCPStore (hence the ignore)
        store = td.TCPStore(os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"]),  # type: ignore[attr-defined,unused-ignore]
                            is_master=False)
        store.set(f"rank{rank}", rank)  # the master address is a live store
        from_thread: list[str] = []
        helper = threading.Thread(target=lambda: from_thread.append(os.environ["MINE"] + os.environ["RANK"]))
        helper.start()
        helper.join()
        seen[info.rank] = (got, os.environ["MINE"], "ROLE_NAME" in os.environ, child, os.environ.copy()["MINE"],
                           isinstance(os.environ, RankEnviron), from_thread)

    assert passed(simulate(body, 4), 4)
    for rank in range(4):
        r = str(rank)
        assert seen[rank] == ((r, r, "4", "0", True, "True"), r, False, [r, r], r, True, [r + r]), seen[rank]
    assert dict(os.environ) == before and not isinstance(os.environ, RankEnviron)  # the process's, untouched


def test_init_and_destroy_are_adopted_on_simulated_ranks() -> None:
    def body(info: Any) -> None:
        td.init_process_group("gloo", init_method="env://")  # what a script asks for: the simulated group
        td.init_process_group()
        sub = td.new_group([0, 1])
        assert isinstance(sub, td.ProcessGroup)
        td.all_reduce(torch.ones(1), group=sub)
        td.destroy_process_group()
        assert sub not in td.distributed_c10d._world.pg_map  # the case's sub-groups go, as with torch's call
        td.init_process_group(backend="gloo")  # a second run of the script adopts it again
        x = torch.ones(1)
        td.all_reduce(x)
        assert x.item() == 2

    assert passed(simulate(body, 2), 2)
    wrong = simulate(lambda info: td.init_process_group("nccl"), 2)
    assert "backend='nccl', but this case's world runs 'simulated'; ask for 'simulated'" in failure_text(
        wrong, 2, "simulated")


def test_negative_control_without_the_adoption_init_is_torchs_error(monkeypatch: pytest.MonkeyPatch) -> None:
    @contextlib.contextmanager
    def not_adopting(*args: Any, **kwargs: Any) -> Iterator[None]:
        yield

    monkeypatch.setattr(adopt_group, "adopting", not_adopting)
    run = simulate(lambda info: td.init_process_group("gloo"), 2)
    assert "trying to initialize the default process group twice" in failure_text(run, 2, "simulated")


SCRIPT_64 = """
import os, sys
import torch, torch.distributed as dist

rank = int(os.environ["RANK"])
print("start", rank, sys.argv[1:])
x = torch.ones(1)
dist.all_reduce(x)  # every rank starts before any goes on: their argv and output interleave
print("end", rank, sys.argv[1:], int(x.item()), file=sys.stderr)
if rank == 17:
    sys.exit(3)
"""


def _scripts_on_64_ranks(path: Path, check: bool) -> tuple[Any, dict[int, ScriptRun]]:
    runs: dict[int, ScriptRun] = {}

    def body(info: Any) -> None:
        runs[info.rank] = run_script(str(path), f"--tag={info.rank}", check=check)

    return simulate(body, 64), runs


def test_run_script_on_64_ranks_keeps_each_ranks_argv_output_status_and_rank(tmp_path: Path) -> None:
    path = tmp_path / "job.py"
    path.write_text(SCRIPT_64)
    argv = list(sys.argv)
    main = sys.modules["__main__"]
    run, runs = _scripts_on_64_ranks(path, check=False)
    assert sys.modules["__main__"] is main, "a rank's script stayed the process's __main__ after the world"
    assert passed(run, 64)
    for rank in range(64):
        assert runs[rank].rank == rank
        assert runs[rank].exit_code == (3 if rank == 17 else 0)
        assert runs[rank].output == f"start {rank} ['--tag={rank}']\nend {rank} ['--tag={rank}'] 64\n", rank
    assert sys.argv == argv
    failing, _ = _scripts_on_64_ranks(path, check=True)
    report = failure_text(failing, 64, "simulated")
    assert report.startswith("distributed case failed on rank(s) 17 of 64 (simulated)"), report
    assert "job.py exited with status 3 on rank 17; its last output:" in report
    assert "end 17 ['--tag=17'] 64" in report


def test_negative_control_without_per_rank_process_state_argv_and_output_mix(tmp_path: Path,
                                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(process_state.RankProcessState, "switch", lambda self, leaving, entering: None)
    path = tmp_path / "job.py"
    path.write_text(SCRIPT_64)
    _, runs = _scripts_on_64_ranks(path, check=False)
    mixed = [rank for rank in range(64) if runs.get(rank) is None
             or runs[rank].output != f"start {rank} ['--tag={rank}']\nend {rank} ['--tag={rank}'] 64\n"]
    assert len(mixed) > 32, mixed


def test_negative_control_without_a_per_rank_main_module_a_ranks_script_stays_main(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Without ``__main__`` in each rank's state, ``runpy`` hands back, when a script ends, the ``__main__`` it found
    at its start: another rank's script, which stays the process's (a later ``multiprocessing`` spawn re-ran it)."""
    main = sys.modules["__main__"]
    monkeypatch.setitem(sys.modules, "__main__", main)  # the leak must not outlive this test
    apply = process_state._Values.apply

    def apply_leaving_main(self: Any, current: Any = None) -> None:
        kept = sys.modules.get("__main__")
        apply(self, current)
        if kept is not None:
            sys.modules["__main__"] = kept

    monkeypatch.setattr(process_state._Values, "apply", apply_leaving_main)
    path = tmp_path / "job.py"
    path.write_text(SCRIPT_64)
    _scripts_on_64_ranks(path, check=False)
    assert sys.modules["__main__"] is not main
    assert getattr(sys.modules["__main__"], "__file__", None) == str(path)


def test_the_worlds_abort_passes_through_except_exception() -> None:
    """A script's ``except Exception`` around a collective cannot swallow the abort and carry on."""
    assert not issubclass(WorldAborted, Exception)
    carried_on: list[int] = []

    def body(info: Any) -> None:
        if info.rank == 1:
            raise ValueError("rank 1 fails before the all_reduce")
        try:
            td.all_reduce(torch.ones(1))
        except Exception:
            pass
        carried_on.append(info.rank)

    run = simulate(body, 2)
    assert not run.passed and carried_on == []
    assert "ValueError: rank 1 fails before the all_reduce" in failure_text(run, 2, "simulated")


def test_a_case_that_means_its_ranks_to_stay_apart_can_say_so() -> None:
    from pytest_dmlbench.world.simulated.runner import SimulatedCase

    apart = SimulatedCase(1, lambda info: None, lambda info: {"info": info}, world_size=4, seed=0, timeout_s=600,
                          communicates=False).run()
    assert passed(apart, 4)
    together = simulate(lambda info: None, 4)
    assert "none of the 4 simulated ranks issued a collective" in failure_text(together, 4, "simulated")
    assert passed(simulate(lambda info: None, 1), 1)  # one rank has nobody to talk to


# what runs on simulated ranks: the launcher itself and what its rank threads call (forked ranks' execute.py not)
RANK_SIDE = ("pytest_dmlbench/world/simulated", "pytest_dmlbench/world/scripts.py",
             "pytest_dmlbench/world/adopt_group.py", "pytest_dmlbench/measure/comm.py",
             "pytest_dmlbench/properties/body.py")


def _swallowing_handlers(source: str) -> list[int]:
    """Lines of ``except BaseException`` handlers that neither follow an ``except WorldAborted`` of the same
    ``try`` nor re-raise (a bare ``raise`` in their body)."""
    import ast

    found = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.Try):
            continue
        names = [ast.unparse(h.type) if h.type is not None else "BaseException" for h in node.handlers]
        for handler, name in zip(node.handlers, names, strict=True):
            earlier = names[:names.index(name)]
            reraises = any(isinstance(n, ast.Raise) and n.exc is None for n in ast.walk(handler))
            if name == "BaseException" and "WorldAborted" not in earlier and not reraises:
                found.append(handler.lineno)
    return found


def test_no_rank_side_handler_swallows_the_worlds_abort() -> None:
    """Being a BaseException, the abort passes every ``except Exception``; of the handlers that catch
    BaseException on the simulated ranks' path, each lets it through first or re-raises."""
    root = Path(__file__).parents[3]
    paths = [p for entry in RANK_SIDE for p in ((root / entry).rglob("*.py") if (root / entry).is_dir()
                                                 else [root / entry])]
    found = {str(p.relative_to(root)): lines for p in paths if (lines := _swallowing_handlers(p.read_text()))}
    assert found == {}, found
    assert _swallowing_handlers("try:\n    f()\nexcept BaseException:\n    pass\n") == [3]  # the negative control


def test_a_process_exit_on_a_rank_is_refused_with_the_reason() -> None:
    """``os._exit`` cannot be one rank's: it raises on the rank instead of ending this test process (which
    surviving to the assertions shows); the others are released."""
    def body(info: Any) -> None:
        if info.rank == 1:
            os._exit(4)
        td.barrier()

    report = failure_text(simulate(body, 2), 2, "simulated")
    assert "ProcessWide: os._exit(4) on simulated rank 1 would end the whole pytest process" in report, report


def test_the_marker_says_a_case_means_its_ranks_to_stay_apart(tmp_path: Path) -> None:
    """``communicates=False`` on the marker reaches the simulated engine; without it the same case fails; a value
    that is not a bool is refused before the run."""
    from tests.conftest import run_pytest, write_files

    write_files(tmp_path, **{"test_apart.py": """
        import pytest

        @pytest.mark.dmlbench(world_size=2, launcher="simulated", communicates=False)
        def test_apart(dist):
            pass

        @pytest.mark.dmlbench(world_size=2, launcher="simulated")
        def test_never_talks(dist):
            pass
    """, "bad/test_bad.py": """
        import pytest

        @pytest.mark.dmlbench(world_size=2, launcher="simulated", communicates="no")
        def test_bad_flag(dist):
            pass
    """})
    run = run_pytest(tmp_path, "--dmlbench", "test_apart.py", "-rA")
    assert run.returncode == 1, run.output
    run.lines.fnmatch_lines(["*none of the 2 simulated ranks issued a collective*"])
    run.lines.fnmatch_lines(["PASSED test_apart.py::test_apart", "FAILED test_apart.py::test_never_talks*"])
    bad = run_pytest(tmp_path, "--dmlbench", "bad")
    assert bad.returncode == 4 and "test_bad_flag: communicates= 'no' must be True or False" in bad.output
