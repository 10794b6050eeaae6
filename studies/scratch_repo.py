"""A temporary git repository of cases under test, and the pytest sessions the live studies run in it."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

IDENTITY = ["-c", "user.email=ci@example.invalid", "-c", "user.name=ci", "-c", "commit.gpgsign=false"]


def git(repo: Path, *args: str) -> str:
    """Run git in ``repo`` as a fixed identity (no signing); its output, stripped."""
    done = subprocess.run(["git", *IDENTITY, *args], cwd=repo, check=True, capture_output=True, text=True)
    return done.stdout.strip()


def commit_all(repo: Path, message: str) -> str:
    """Commit everything in ``repo``'s working tree; the new commit's hash."""
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", message)
    return git(repo, "rev-parse", "HEAD")


def commits_of(repo: Path, versions: dict[str, dict[str, str]]) -> dict[str, str]:
    """A new repository in ``repo`` (branch ``main``) with one commit per entry of ``versions``, in order: each
    writes its files (name: text) and commits them under its name. ``{name: commit}``."""
    git(repo, "init", "-q", "-b", "main")
    commits = {}
    for name, files in versions.items():
        for path, text in files.items():
            (repo / path).write_text(text)
        commits[name] = commit_all(repo, name)
    return commits


def pytest_run(repo: Path, args: list[str], timeout: float = 7200, **extra_env: str) -> tuple[float, int, str]:
    """``python -m pytest -q ARGS`` in ``repo`` (no ``PYTEST_*`` variables of an outer run, ``extra_env`` set):
    wall seconds, exit code and output."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")} | extra_env
    begin = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *args], cwd=repo,
                          capture_output=True, text=True, env=env, timeout=timeout)
    return time.monotonic() - begin, done.returncode, done.stdout + done.stderr


def aa_clone(source: Path, folder: Path) -> Path:
    """A clone of ``source``'s HEAD in ``folder`` with a comment-only commit on top: ``HEAD~1`` is the same code
    (an A/A comparison); ``folder``."""
    git(folder.parent, "clone", "-q", str(source), str(folder))
    marked = folder / "bench_cases" / "__init__.py"
    marked.write_text(marked.read_text() + "\n# A/A: a comment-only change\n")
    git(folder, "commit", "-q", "-am", "A/A: a comment-only change")
    return folder
