"""A real git repository in a temporary folder, for the paired gate's tests."""

from __future__ import annotations

import subprocess
from pathlib import Path

from tests.conftest import write_files

IDENTITY = ["-c", "user.email=ci@example.invalid", "-c", "user.name=ci", "-c", "commit.gpgsign=false"]


def git(repo: Path, *args: str) -> str:
    done = subprocess.run(["git", *IDENTITY, *args], cwd=repo, capture_output=True, text=True, check=True)
    return done.stdout.strip()


def make_repo(folder: Path, **files: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    git(folder, "init", "-q", "-b", "main")
    write_files(folder, **files)
    commit_all(folder, "base")
    return folder


def commit_all(repo: Path, message: str) -> str:
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", message)
    return git(repo, "rev-parse", "HEAD")


def user_state(repo: Path) -> tuple[str, str, str, str]:
    """What must never change: HEAD, branches, index entries and the working tree's status. Python's own
    ``__pycache__`` folders are left out: any pytest run that imports the user's modules writes them (unless
    ``PYTHONDONTWRITEBYTECODE`` is set), and real repositories ignore them."""
    status = [line for line in git(repo, "status", "--porcelain").splitlines()
              if not (line.startswith("?? ") and line.endswith("__pycache__/"))]
    return (git(repo, "rev-parse", "HEAD"), git(repo, "branch", "-a"), git(repo, "ls-files", "-s"),
            "\n".join(status))
