"""``python -m pytest_dmlbench`` in real subprocesses: exit codes and what it prints."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from casefactory import MACHINE, make_case, make_run

from pytest_dmlbench.baseline.fingerprint import machine_key
from pytest_dmlbench.baseline.store import BaselineStore
from pytest_dmlbench.report import write_results

REPO = Path(__file__).resolve().parents[2]
NODE_A = "bench_cases/test_ddp.py::test_step[ddp]"
NODE_B = "bench_cases/test_ddp.py::test_step[bucketed]"


def run_cli(*args: str | Path, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
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
    BaselineStore(tmp_path / "baselines", MACHINE).save_run(baseline)
    paths["root"] = tmp_path / "baselines"
    return paths


def test_compare_unchanged_exits_0(files: dict[str, Path], tmp_path: Path) -> None:
    for baseline in (files["baseline"], files["root"], files["root"] / machine_key(MACHINE)):
        proc = run_cli("compare", baseline, files["same"], cwd=tmp_path)
        assert proc.returncode == 0, proc.stdout + proc.stderr
        assert "unchanged" in proc.stdout and "REGRESSION" not in proc.stdout


def test_compare_slowdown_exits_1_with_the_evidence(files: dict[str, Path], tmp_path: Path) -> None:
    out = tmp_path / "compared.json"
    proc = run_cli("compare", files["root"], files["slower"], "--json", out, cwd=tmp_path)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "REGRESSION" in proc.stdout
    assert f"{NODE_A}\n  step_time_s regressed: median 10" in proc.stdout
    assert "--dmlbench-save" in proc.stdout
    assert '"kind": "regression"' in out.read_text()


def test_threshold_option_can_absorb_the_slowdown(files: dict[str, Path], tmp_path: Path) -> None:
    proc = run_cli("compare", files["baseline"], files["slower"], "--threshold", "30", cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_fail_on_improvement(files: dict[str, Path], tmp_path: Path) -> None:
    assert run_cli("compare", files["slower"], files["baseline"], cwd=tmp_path).returncode == 0
    proc = run_cli("compare", files["slower"], files["baseline"], "--fail-on-improvement", cwd=tmp_path)
    assert proc.returncode == 1 and "improved" in proc.stdout


def test_corrupt_baseline_exits_2_naming_the_file_and_leaves_it(
    files: dict[str, Path], tmp_path: Path
) -> None:
    target = BaselineStore(files["root"], MACHINE).path_for(NODE_B)
    target.write_text('{"schema": 1, "machine"')
    proc = run_cli("compare", files["root"], files["same"], cwd=tmp_path)
    assert proc.returncode == 2
    assert proc.stderr.startswith(f"error: {target}: is not valid JSON")
    assert "--dmlbench-save" in proc.stderr and "Traceback" not in proc.stderr
    assert target.read_text() == '{"schema": 1, "machine"'


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
        f"no baseline for this machine (key {machine_key(other.machine)}); it has: {machine_key(MACHINE)}"
        in (proc.stderr)
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
    assert proc.stdout.startswith(f"{files['root'] / machine_key(MACHINE)} (machine {machine_key(MACHINE)}")
    assert "test_step\n" in proc.stdout and "[bucketed]" in proc.stdout  # wrapped at the parameter id


def test_show_of_an_empty_folder_exits_2(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    proc = run_cli("show", tmp_path / "empty", cwd=tmp_path)
    assert proc.returncode == 2 and "holds no baseline files" in proc.stderr


def test_baselines_root_resolves_one_machine_folder_per_backend(tmp_path: Path) -> None:
    gloo_case, nccl_case = make_case(NODE_A, 0.010, seed=1), make_case(NODE_B, 0.010, seed=2)
    nccl_case.backend = "nccl"
    root = tmp_path / "baselines"
    BaselineStore(root, MACHINE).save_case(gloo_case)
    BaselineStore(root, {**MACHINE, "backend": "nccl"}).save_case(nccl_case)
    slower_nccl = make_case(NODE_B, 0.013, seed=3)
    slower_nccl.backend = "nccl"
    write_results(tmp_path / "cur.json", make_run([make_case(NODE_A, 0.010, seed=4), slower_nccl]))
    proc = run_cli("compare", root, tmp_path / "cur.json", cwd=tmp_path)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert f"{NODE_B}\n  step_time_s regressed" in proc.stdout
    assert "new" not in proc.stdout.split("verdicts:")[1]  # both cases found their baseline
