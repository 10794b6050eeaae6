"""``python -m pytest_dmlbench`` in real subprocesses: exit codes and what it prints."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from pytest_dmlbench.baseline.fingerprint import machine_key
from pytest_dmlbench.baseline.identity import BaselineIdentity
from pytest_dmlbench.baseline.store import BaselineStore
from pytest_dmlbench.gates.stored.keeper import BaselineKeeper
from pytest_dmlbench.results import CaseResult
from pytest_dmlbench.results.report import write_results
from tests.configfactory import make_config
from tests.results.casefactory import MACHINE, make_case, make_run

REPO = Path(__file__).resolve().parents[2]
NODE_A = "bench_cases/test_ddp.py::test_step[ddp]"
NODE_B = "bench_cases/test_ddp.py::test_step[bucketed]"
WS4 = BaselineIdentity(4, "gloo", "fork", "persistent")  # make_case's world size and backend
SAVES = 3  # saved runs before a figure timed per round is judged (the compare rule's min_runs)


def save_baselines(root: Path, cases: Callable[[int], list[CaseResult]]) -> None:
    """Save the cases of ``cases(seed)`` SAVES times, each time measured anew, as --dmlbench-save would."""
    keeper = BaselineKeeper(make_config(root, save=True),
                            fingerprint_for=lambda backend: {**MACHINE, "backend": backend})
    for seed in range(100, 100 + SAVES):
        for case in cases(seed):
            keeper.process(case, {"world_size": case.world_size})


def run_cli(*args: str | Path, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]), "COLUMNS": "80"}
    return subprocess.run(
        [sys.executable, "-m", "pytest_dmlbench", *map(str, args)],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
    )


@pytest.fixture
def files(tmp_path: Path) -> dict[str, Path]:
    baseline = make_run([make_case(NODE_A, 0.010, seed=1), make_case(NODE_B, 0.020, seed=2)])
    same = make_run([make_case(NODE_A, 0.010, seed=3), make_case(NODE_B, 0.020, seed=4)])
    slower = make_run([make_case(NODE_A, 0.0125, seed=5), make_case(NODE_B, 0.020, seed=6)])
    paths = {name: tmp_path / f"{name}.json" for name in ("baseline", "same", "slower")}
    for name, results in (("baseline", baseline), ("same", same), ("slower", slower)):
        write_results(paths[name], results)
    save_baselines(tmp_path / "baselines",
                   lambda seed: [make_case(NODE_A, 0.010, seed=seed), make_case(NODE_B, 0.020, seed=seed + 50)])
    paths["root"] = tmp_path / "baselines"
    return paths


def test_compare_unchanged_exits_0(files: dict[str, Path], tmp_path: Path) -> None:
    machine = files["root"] / machine_key(MACHINE)
    for baseline in (files["baseline"], files["root"], machine, machine / WS4.key):
        proc = run_cli("compare", baseline, files["same"], cwd=tmp_path)
        assert proc.returncode == 0, proc.stdout + proc.stderr
        assert "unchanged" in proc.stdout and "REGRESSION" not in proc.stdout


def test_compare_slowdown_exits_1_with_the_evidence(files: dict[str, Path], tmp_path: Path) -> None:
    out = tmp_path / "compared.json"
    proc = run_cli("compare", files["root"], files["slower"], "--json", out, cwd=tmp_path)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "REGRESSION" in proc.stdout
    assert f"{NODE_A}\n  step_time_s regressed" in proc.stdout
    assert f"pytest --dmlbench --world-size 4 --dmlbench-backend gloo '{NODE_A}' --dmlbench-save" in proc.stdout
    assert '"kind": "regression"' in out.read_text()


def test_two_single_runs_are_inconclusive_unless_min_runs_allows_them(files: dict[str, Path], tmp_path: Path) -> None:
    once = tmp_path / "once.json"
    write_results(once, make_run([make_case(NODE_A, 0.010, seed=1)]))
    slower = tmp_path / "slower-once.json"
    write_results(slower, make_run([make_case(NODE_A, 0.013, seed=2)]))
    proc = run_cli("compare", once, slower, cwd=tmp_path)
    assert proc.returncode == 0 and "inconclusive" in proc.stdout, proc.stdout + proc.stderr
    judged = run_cli("compare", once, slower, "--min-runs", "1", cwd=tmp_path)
    assert judged.returncode == 1 and "REGRESSION" in judged.stdout, judged.stdout + judged.stderr
    bad = run_cli("compare", once, slower, "--min-runs", "0", cwd=tmp_path)
    assert bad.returncode == 2 and "--min-runs: 0 is too small; give an integer >= 1" in bad.stderr


def test_threshold_option_can_absorb_the_slowdown(files: dict[str, Path], tmp_path: Path) -> None:
    proc = run_cli("compare", files["baseline"], files["slower"], "--threshold", "30", cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_fail_on_improvement(files: dict[str, Path], tmp_path: Path) -> None:
    slower = tmp_path / "slower-baselines"
    save_baselines(slower, lambda seed: [make_case(NODE_A, 0.0125, seed=seed), make_case(NODE_B, 0.020, seed=seed)])
    assert run_cli("compare", slower, files["baseline"], cwd=tmp_path).returncode == 0
    proc = run_cli("compare", slower, files["baseline"], "--fail-on-improvement", cwd=tmp_path)
    assert proc.returncode == 1 and "improved" in proc.stdout


def test_corrupt_baseline_exits_2_naming_the_file_and_leaves_it(
    files: dict[str, Path], tmp_path: Path
) -> None:
    target = BaselineStore(files["root"], MACHINE, WS4).path_for(NODE_B)
    target.write_text('{"schema": 2, "machine"')
    proc = run_cli("compare", files["root"], files["same"], cwd=tmp_path)
    assert proc.returncode == 2
    assert proc.stderr.startswith(f"error: {target}: is not valid JSON")
    assert "--dmlbench-save" in proc.stderr and "Traceback" not in proc.stderr
    assert target.read_text() == '{"schema": 2, "machine"'


@pytest.mark.parametrize(
    "args,expected",
    [
        (["compare", "missing.json", "same.json"], "missing.json: no such file or folder"),
        (["compare", "baseline.json", "nothere.json"], "nothere.json: no such file"),
        (["compare", "baseline.json", "same.json", "--threshold", "abc"], "--threshold: 'abc' is not a percentage"),
        (["compare", "baseline.json", "same.json", "--alpha", "1.5"], "must lie strictly between 0 and 1"),
        (["compare", "baseline.json"], "the following arguments are required: results"),
        (["frobnicate"], "invalid choice: 'frobnicate'"),
    ],
    ids=["no-baseline", "no-results", "bad-threshold", "bad-alpha", "missing-arg", "bad-command"],
)
def test_bad_input_exits_2_with_a_clear_message(
    files: dict[str, Path], tmp_path: Path, args: list[str], expected: str
) -> None:
    proc = run_cli(*args, cwd=tmp_path)
    assert proc.returncode == 2
    assert expected in proc.stderr and "Traceback" not in proc.stderr


def test_baselines_root_without_this_machine_lists_what_it_has(
    files: dict[str, Path], tmp_path: Path
) -> None:
    other = make_run([make_case(NODE_A, 0.010, seed=3)])
    other.machine = {**MACHINE, "logical_cores": 64}
    write_results(tmp_path / "other.json", other)
    proc = run_cli("compare", files["root"], tmp_path / "other.json", cwd=tmp_path)
    assert proc.returncode == 2
    assert (
        f"no baseline for these results (looked for {machine_key(other.machine)}/{WS4.key}); it has: "
        f"{machine_key(MACHINE)}/{WS4.key}" in proc.stderr
    )


def test_show_prints_the_table_of_a_file_and_of_a_baselines_root(
    files: dict[str, Path], tmp_path: Path
) -> None:
    proc = run_cli("show", files["same"], cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "test_step" in proc.stdout and "throughput_samples_per_s" in proc.stdout  # one line per case
    assert "- step_time_s" not in proc.stdout
    verbose = run_cli("show", "-v", files["same"], cwd=tmp_path)
    assert verbose.returncode == 0, verbose.stderr
    assert "- step_time_s" in verbose.stdout and "- peak_rss_mb" in verbose.stdout
    proc = run_cli("show", files["root"], cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    folder = files["root"] / machine_key(MACHINE) / WS4.key
    assert proc.stdout.startswith(f"{folder} (machine {machine_key(MACHINE)}")
    assert max(len(line) for line in proc.stdout.splitlines()[1:]) <= 80  # COLUMNS=80 (run_cli), paths aside
    assert "[bucketed]" in proc.stdout


def test_show_of_an_empty_folder_exits_2(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    proc = run_cli("show", tmp_path / "empty", cwd=tmp_path)
    assert proc.returncode == 2 and "holds no baseline files" in proc.stderr


def test_baselines_root_resolves_one_machine_folder_per_backend(tmp_path: Path) -> None:
    root = tmp_path / "baselines"

    def cases(seed: int) -> list[CaseResult]:
        nccl = make_case(NODE_B, 0.010, seed=seed + 50)
        nccl.backend = "nccl"
        return [make_case(NODE_A, 0.010, seed=seed), nccl]

    save_baselines(root, cases)
    slower_nccl = make_case(NODE_B, 0.013, seed=3)
    slower_nccl.backend = "nccl"
    write_results(tmp_path / "cur.json", make_run([make_case(NODE_A, 0.010, seed=4), slower_nccl]))
    proc = run_cli("compare", root, tmp_path / "cur.json", cwd=tmp_path)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert f"{NODE_B}\n  step_time_s regressed" in proc.stdout
    assert "new" not in proc.stdout.split("verdicts on")[1]  # both cases found their baseline


def test_results_are_compared_with_the_baselines_of_their_identity(tmp_path: Path) -> None:
    root = tmp_path / "baselines"
    save_baselines(root, lambda seed: [make_case(NODE_A, 0.010, seed=seed, world_size=2),
                                       make_case(NODE_B, 0.020, seed=seed + 50, world_size=2)])
    save_baselines(root, lambda seed: [make_case(NODE_A, 0.013, seed=seed + 20, world_size=4)])
    current = make_run([make_case(NODE_A, 0.013, seed=7, world_size=4), make_case(NODE_B, 0.020, seed=8, world_size=2)])
    write_results(tmp_path / "cur.json", current)
    machine = root / machine_key(MACHINE)
    for baseline in (root, machine):
        proc = run_cli("compare", baseline, tmp_path / "cur.json", cwd=tmp_path)
        assert proc.returncode == 0, proc.stdout + proc.stderr
        assert f"baseline: {machine / 'ws2-gloo-fork-persistent'}, {machine / WS4.key}" in proc.stdout
        assert "new" not in proc.stdout.split("verdicts on")[1] and "regress" not in proc.stdout
    # negative control: NODE_A's world-size-2 baseline, given explicitly, is 30 % faster than this run
    proc = run_cli("compare", machine / "ws2-gloo-fork-persistent", tmp_path / "cur.json", cwd=tmp_path)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert f"{NODE_A}\n  step_time_s" in proc.stdout


def test_results_of_an_identity_without_baselines_list_what_there_is(tmp_path: Path) -> None:
    root = tmp_path / "baselines"
    save_baselines(root, lambda seed: [make_case(NODE_A, 0.010, seed=seed, world_size=2)])
    for case, run, wanted in ((make_case(NODE_A, world_size=1), {}, "ws1-gloo-fork-persistent"),
                              (make_case(NODE_A, world_size=2), {"launcher": "ray"}, "ws2-gloo-ray-persistent")):
        results = make_run([case])
        results.run.update(run)
        write_results(tmp_path / "cur.json", results)
        proc = run_cli("compare", root, tmp_path / "cur.json", cwd=tmp_path)
        assert proc.returncode == 2, proc.stdout + proc.stderr
        key = machine_key(MACHINE)
        assert (f"no baseline for these results (looked for {key}/{wanted}); it has: "
                f"{key}/ws2-gloo-fork-persistent") in proc.stderr


def test_old_layout_files_are_named_never_read_silently_and_left_alone(tmp_path: Path) -> None:
    root = tmp_path / "baselines"
    save_baselines(root, lambda seed: [make_case(NODE_A, 0.010, seed=seed)])
    store = BaselineStore(root, MACHINE, WS4)
    new = store.path_for(NODE_A)
    old = store.machine_folder / new.name  # where pytest-dmlbench 0.2 kept it
    old.write_bytes(new.read_bytes().replace(b'"schema": 2', b'"schema": 1'))
    before = old.read_bytes()
    write_results(tmp_path / "cur.json", make_run([make_case(NODE_A, 0.010, seed=7)]))
    proc = run_cli("compare", root, tmp_path / "cur.json", cwd=tmp_path)  # the new layout beside the old
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert (f"note: 1 baseline file of an older layout (schema 1) is in {store.machine_folder}; it is left "
            f"untouched and not read here; `python -m pytest_dmlbench show {old}` gives the command") in proc.stderr
    new.unlink()
    store.folder.rmdir()
    proc = run_cli("compare", root, tmp_path / "cur.json", cwd=tmp_path)  # the old layout only
    assert proc.returncode == 2
    assert f"it has: {store.key} (older layout, schema 1)" in proc.stderr
    proc = run_cli("show", root, cwd=tmp_path)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert proc.stderr.startswith(f"error: {old}: written by an older pytest-dmlbench (schema 1")
    assert (f"pytest --dmlbench --world-size 4 --dmlbench-backend gloo '{NODE_A}' --dmlbench-save"
            in proc.stderr)
    assert old.read_bytes() == before


def test_results_file_of_schema_1_exits_2_with_the_command_that_writes_it_anew(
    files: dict[str, Path], tmp_path: Path
) -> None:
    old = files["same"].read_bytes().replace(b'"schema": 2', b'"schema": 1')
    files["same"].write_bytes(old)
    proc = run_cli("compare", files["root"], files["same"], cwd=tmp_path)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert proc.stderr.startswith(f"error: {files['same']}: written by an older pytest-dmlbench (schema 1")
    assert (f"Write the results anew with this version: pytest --dmlbench --world-size 4 --dmlbench-backend gloo "
            f"--dmlbench-json {files['same']}") in proc.stderr
    assert files["same"].read_bytes() == old


def test_compare_of_files_with_no_case_in_common_exits_2_naming_both(files: dict[str, Path], tmp_path: Path) -> None:
    elsewhere = make_run([make_case("bench_cases/test_other.py::test_x", 0.010, seed=3)])
    write_results(tmp_path / "elsewhere.json", elsewhere)
    proc = run_cli("compare", files["baseline"], tmp_path / "elsewhere.json", cwd=tmp_path)
    assert proc.returncode == 2, proc.stdout
    assert "nothing to compare: no case of" in proc.stderr and "test_other.py::test_x" in proc.stderr
    assert NODE_A in proc.stderr and "Traceback" not in proc.stderr
    # negative control: one case in common is enough to compare
    assert run_cli("compare", files["baseline"], files["same"], cwd=tmp_path).returncode == 0


def test_show_of_a_json_file_that_is_not_dmlbench_s_says_so(tmp_path: Path) -> None:
    (tmp_path / "package.json").write_text('{"name": "x", "version": "1.0"}')
    proc = run_cli("show", tmp_path / "package.json", cwd=tmp_path)
    assert proc.returncode == 2
    assert ("is not a pytest-dmlbench results or baseline file: it has neither 'schema' nor 'cases' "
            "(its keys: name, version)") in proc.stderr
    assert "schema None" not in proc.stderr


def test_show_into_a_closed_pipe_stops_quietly(tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
    # far more than a pipe's buffer (64 kB), so the CLI is still writing when head has gone
    many = make_run([make_case(f"bench_cases/test_many.py::test_step[{i}]", 0.010, seed=i) for i in range(400)])
    write_results(tmp_path / "many.json", many)
    # `show -v | head -1`: head exits after one line, the CLI's later writes meet a closed pipe
    proc = subprocess.run(f"{sys.executable} -m pytest_dmlbench show -v many.json | head -1",
                          shell=True, cwd=tmp_path, env=env, capture_output=True, text=True)
    assert proc.stdout.count("\n") == 1
    assert "BrokenPipeError" not in proc.stderr and "Traceback" not in proc.stderr, proc.stderr


@pytest.mark.parametrize("value", ["0", "-1", "soon"])
def test_env_refuses_a_timeout_that_is_not_positive_seconds(tmp_path: Path, value: str) -> None:
    proc = run_cli("env", "--no-live", "--timeout", value, cwd=tmp_path)
    assert proc.returncode == 2 and "--timeout" in proc.stderr, proc.stderr


def test_plot_into_a_path_that_cannot_be_a_folder_exits_2(files: dict[str, Path], tmp_path: Path) -> None:
    (tmp_path / "a_file").write_text("")
    proc = run_cli("plot", files["same"], "--out", tmp_path / "a_file", cwd=tmp_path)
    assert proc.returncode == 2 and "--out" in proc.stderr and "is a file, not a folder" in proc.stderr, proc.stderr
    assert "Traceback" not in proc.stderr
