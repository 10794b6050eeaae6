"""Anchor nights choose the fixed anchor, and ci/nightly.sh adds every night to the history, in real git
repositories (a stand-in ``pytest`` writes a recorded results file and fails, as a red night does)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from pytest_dmlbench.drift.history import load_history
from pytest_dmlbench.plots.html import write_html
from pytest_dmlbench.results.jsonio import write_results
from tests.drift.nights import night_results
from tests.gates.paired.gitrepo import commit_all, git, make_repo

CI = Path(__file__).resolve().parents[2] / "ci"


def ref(repo: Path, **env: str) -> subprocess.CompletedProcess[str]:
    inherited = {k: v for k, v in os.environ.items() if not k.startswith("DMLBENCH_")}
    return subprocess.run(["bash", str(CI / "nightly_ref.sh")], cwd=repo, capture_output=True, text=True,
                          env={**inherited, **env})


def releases(tmp_path: Path) -> tuple[Path, list[str]]:
    """base, v1.0 (tagged), two later commits."""
    repo = make_repo(tmp_path / "repo", **{"lib.py": "x = 1\n"})
    commits = [git(repo, "rev-parse", "HEAD")]
    for number in (2, 3, 4):
        (repo / "lib.py").write_text(f"x = {number}\n")
        commits.append(commit_all(repo, f"change {number}"))
        if number == 2:
            git(repo, "tag", "v1.0")
    return repo, commits


def test_an_anchor_night_gates_against_the_newest_release_tag_or_the_pinned_commit(tmp_path: Path) -> None:
    repo, commits = releases(tmp_path)
    night = ref(repo, DMLBENCH_ANCHOR_NIGHT="1", DMLBENCH_LAST_GREEN=commits[2])
    assert night.stdout.strip() == "v1.0"
    assert "anchor night: gating against the fixed anchor v1.0 instead of the last green night" in night.stderr
    assert ref(repo, DMLBENCH_ANCHOR_NIGHT="1", DMLBENCH_ANCHOR=commits[0]).stdout.strip() == commits[0]
    assert ref(repo, DMLBENCH_LAST_GREEN=commits[2]).stdout.strip() == commits[2]  # an ordinary night
    assert ref(repo, DMLBENCH_ANCHOR_NIGHT="1", DMLBENCH_AGAINST="HEAD~2").stdout.strip() == "HEAD~2"


def test_an_accepted_slowdown_after_the_anchor_moves_it(tmp_path: Path) -> None:
    repo, _ = releases(tmp_path)
    (repo / "lib.py").write_text("x = 5\n")
    accepted = commit_all(repo, "slower\n\nDmlbench-Accept: exact reduction")
    (repo / "lib.py").write_text("x = 6\n")
    commit_all(repo, "later")
    assert ref(repo, DMLBENCH_ANCHOR_NIGHT="1").stdout.strip() == accepted


def test_an_anchor_night_without_an_anchor_stops_with_the_fix(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo", **{"lib.py": "x = 1\n"})
    done = ref(repo, DMLBENCH_ANCHOR_NIGHT="1")
    assert done.returncode == 2 and done.stdout == ""
    assert "set DMLBENCH_ANCHOR to a pinned commit" in done.stderr and "or tag a release v*" in done.stderr


def nightly(tmp_path: Path, repo: Path, night: int, **env: str) -> subprocess.CompletedProcess[str]:
    """ci/nightly.sh with a stand-in pytest that writes night ``night``'s results and report, then fails."""
    results = tmp_path / f"recorded-{night}.json"
    write_results(results, night_results(night, 1.0, git(repo, "rev-parse", "HEAD")))
    write_html(tmp_path / "page.html", ["results.json"], [night_results(night, 1.0, "ab" * 20)], [], [])
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    (bin_dir / "pytest").write_text(
        "#!/bin/sh\n"
        f'cp "{results}" results.json && mkdir -p report && cp "{tmp_path / "page.html"}" report/report.html\n'
        "exit 1\n")
    (bin_dir / "pytest").chmod(0o755)
    inherited = {k: v for k, v in os.environ.items() if not k.startswith(("DMLBENCH_", "GITHUB_"))}
    path = f"{bin_dir}:{Path(sys.executable).parent}:{os.environ['PATH']}"
    return subprocess.run(["bash", str(CI / "nightly.sh"), "results.json", "junit.xml", "report"], cwd=repo,
                          capture_output=True, text=True,
                          env={**inherited, "PATH": path, "PYTHONPATH": str(CI.parent), **env})


def test_the_nightly_adds_every_night_to_the_history_and_keeps_pytests_status(tmp_path: Path) -> None:
    repo, _ = releases(tmp_path)
    summary = tmp_path / "summary.md"
    history = tmp_path / "history"
    first = nightly(tmp_path, repo, 1, DMLBENCH_HISTORY=str(history), GITHUB_STEP_SUMMARY=str(summary))
    assert first.returncode == 1, first.stderr  # the red night stays red
    assert "recorded 3 case-metric(s) of " in first.stdout
    assert "drift over 1 night(s)" in first.stdout and "## Drift across nights" in summary.read_text()
    assert '<section id="drift">' in (repo / "report" / "report.html").read_text()
    os.unlink(repo / "results.json")
    second = nightly(tmp_path, repo, 2, DMLBENCH_HISTORY=str(history), DMLBENCH_ANCHOR_NIGHT="1")
    assert second.returncode == 1, second.stderr
    nights = load_history(history)
    assert [(n.ref, n.anchor) for n in nights] == [("HEAD~1", False), ("v1.0", True)]
