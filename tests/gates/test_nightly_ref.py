"""Which REF the nightly gates against, in a real git repository, and how a commit accepts a slowdown."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from tests.gates.paired.gitrepo import commit_all, git, make_repo

SCRIPT = Path(__file__).resolve().parents[2] / "ci" / "nightly_ref.sh"


def ref(repo: Path, **env: str) -> str:
    done = subprocess.run(["bash", str(SCRIPT)], cwd=repo, capture_output=True, text=True, check=True,
                          env={**os.environ, "DMLBENCH_AGAINST": "", "DMLBENCH_LAST_GREEN": "", **env})
    return done.stdout.strip()


def history(tmp_path: Path, accept_message: str) -> tuple[Path, list[str]]:
    repo = make_repo(tmp_path / "repo", **{"lib.py": "x = 1\n"})
    commits = [git(repo, "rev-parse", "HEAD")]
    for number, message in enumerate(["faster thing", accept_message, "later fix"], start=2):
        (repo / "lib.py").write_text(f"x = {number}\n")
        commits.append(commit_all(repo, message))
    return repo, commits


def test_a_commit_that_accepts_its_slowdown_becomes_ref(tmp_path: Path) -> None:
    repo, commits = history(tmp_path, "slower but correct\n\nDmlbench-Accept: the exact reduction costs 20 %")
    assert ref(repo, DMLBENCH_LAST_GREEN=commits[0]) == commits[2]


def test_without_an_accepting_commit_ref_is_the_last_green_night(tmp_path: Path) -> None:
    repo, commits = history(tmp_path, "slower but correct (mentions Dmlbench-Accept: only in passing)")
    assert ref(repo, DMLBENCH_LAST_GREEN=commits[0]) == commits[0]
    assert ref(repo) == "HEAD~1"  # no last green night, no stored commit
    assert ref(repo, DMLBENCH_LAST_GREEN=commits[-1]) == "HEAD~1"  # REF is this very commit
    assert ref(repo, DMLBENCH_AGAINST="main~2") == "main~2"


def test_an_accepting_commit_before_ref_changes_nothing(tmp_path: Path) -> None:
    repo, commits = history(tmp_path, "slower\n\nDmlbench-Accept: intended")
    assert ref(repo, DMLBENCH_LAST_GREEN=commits[2]) == commits[2]
    assert ref(repo, DMLBENCH_LAST_GREEN=commits[3]) == "HEAD~1"
