"""REF's worktree: resolving refs, caching, recovering from a killed run, never touching the user's tree."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from pytest_dmlbench.errors import RefError
from pytest_dmlbench.gates.paired.launch import recorded_commit
from pytest_dmlbench.gates.paired.worktree import checkout, prune_cache, repository_root, resolve_commit
from tests.gates.paired.gitrepo import commit_all, git, make_repo, user_state


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    repo = make_repo(tmp_path / "repo", **{"lib.py": "VALUE = 1\n"})
    (repo / "lib.py").write_text("VALUE = 2\n")
    commit_all(repo, "second")
    (repo / "lib.py").write_text("VALUE = 3  # uncommitted\n")
    (repo / "untracked.txt").write_text("mine\n")
    return repo


def test_checkout_makes_a_detached_worktree_and_leaves_the_user_alone(repo: Path) -> None:
    before = user_state(repo)
    first = resolve_commit(repo, "HEAD~1")
    tree = checkout(repo, first)
    assert (tree.path / "lib.py").read_text() == "VALUE = 1\n"
    assert ".git" in tree.path.parts  # inside the git directory, invisible to the working tree
    assert user_state(repo) == before
    assert (repo / "lib.py").read_text() == "VALUE = 3  # uncommitted\n"
    again = checkout(repo, first)  # cached: reused
    assert again.path == tree.path


def test_a_worktree_left_broken_by_a_killed_run_is_rebuilt(repo: Path) -> None:
    commit = resolve_commit(repo, "HEAD")
    tree = checkout(repo, commit)
    (tree.path / "lib.py").write_text("half written")  # a run killed while the tree was being made
    (tree.path / ".git").unlink()
    before = user_state(repo)
    rebuilt = checkout(repo, commit)
    assert (rebuilt.path / "lib.py").read_text() == "VALUE = 2\n"
    assert user_state(repo) == before
    shutil.rmtree(rebuilt.path)  # a folder deleted by hand: git's stale record is pruned
    assert (checkout(repo, commit).path / "lib.py").read_text() == "VALUE = 2\n"


def test_old_unused_worktrees_are_pruned(repo: Path) -> None:
    commits = git(repo, "rev-list", "HEAD").split()
    trees = [checkout(repo, c) for c in commits]
    for tree in trees:
        import os

        os.utime(tree.path, (0, 0))  # unused for a long time
    removed = prune_cache(repo, keep=1)
    assert sorted(removed) == sorted(t.path for t in trees)
    assert "dmlbench-worktrees" not in git(repo, "worktree", "list")


def test_unknown_ref_names_the_fix(repo: Path) -> None:
    with pytest.raises(RefError, match=r"names no commit.*git fetch"):
        resolve_commit(repo, "no-such-branch")
    with pytest.raises(RefError, match="not a git ref"):
        resolve_commit(repo, "--output=x")


def test_shallow_clone_missing_ref_says_how_to_fetch(repo: Path, tmp_path: Path) -> None:
    shallow = tmp_path / "shallow"
    subprocess.run(["git", "clone", "-q", "--depth", "1", f"file://{repo}", str(shallow)], check=True)
    with pytest.raises(RefError, match=r"shallow clone.*fetch-depth: 0"):
        resolve_commit(shallow, "HEAD~1")


def test_not_a_repository(tmp_path: Path) -> None:
    with pytest.raises(RefError, match="not inside a git repository"):
        repository_root(tmp_path)


def test_baseline_commit_is_read_from_the_stored_files(tmp_path: Path) -> None:
    folder = tmp_path / "baselines" / "machine"
    folder.mkdir(parents=True)
    with pytest.raises(RefError, match="record no commit"):
        recorded_commit(tmp_path / "baselines")
    (folder / "old.json").write_text(json.dumps({"schema": 1, "run": {}, "cases": []}))  # written before commits
    (folder / "a.json").write_text(json.dumps({"schema": 1, "run": {"commit": "abc"}, "cases": []}))
    (folder / "b.json").write_text(json.dumps({"schema": 1, "run": {"commit": "abc"}, "cases": []}))
    (folder / "c.json").write_text(json.dumps({"schema": 1, "run": {"commit": "def"}, "cases": []}))
    assert recorded_commit(tmp_path / "baselines") == "abc"
