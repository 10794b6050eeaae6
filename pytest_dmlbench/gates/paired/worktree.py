"""REF's code on disk: a cached, detached git worktree per commit, made and removed safely.

Worktrees live under ``<git common dir>/dmlbench-worktrees/<sha>``: inside ``.git``, so they never show
in the user's working tree, and are shared by every checkout of the repository. Making one changes no
branch, no index entry and no file of the user's working tree (``git worktree add --detach``). A lock file
per commit keeps concurrent runs from building the same worktree twice; a worktree left half-made by a
killed run fails its check and is rebuilt; the least recently used ones beyond :data:`KEEP` are removed
(only ours, only when no run holds their lock).
"""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from pytest_dmlbench.errors import RefError

FOLDER = "dmlbench-worktrees"
KEEP = 4  # cached worktrees kept per repository
IDLE_S = 3600.0  # a worktree unused this long may be removed
GIT_TIMEOUT_S = 120.0


def git(cwd: Path, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    """Run git with the user's configuration but no prompts; RefError when git itself is missing."""
    env = {**os.environ, "GIT_TERMINAL_PROMPT": "0"}
    try:
        done = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, env=env,
                              timeout=GIT_TIMEOUT_S, check=False)
    except FileNotFoundError:
        raise RefError("--dmlbench-against needs git on PATH; install git") from None
    if check and done.returncode != 0:
        raise RefError(f"git {' '.join(args)} failed in {cwd}: {done.stderr.strip()}")
    return done


def repository_root(start: Path) -> Path:
    """The top of the git working tree holding ``start``."""
    done = git(start, "rev-parse", "--show-toplevel", check=False)
    if done.returncode != 0:
        raise RefError(
            f"--dmlbench-against: {start} is not inside a git repository, so there is no REF to measure. "
            "Run from a git checkout, or compare with stored baselines instead (leave out --dmlbench-against)."
        )
    return Path(done.stdout.strip())


def resolve_commit(root: Path, ref: str) -> str:
    """The full commit id ``ref`` names; RefError naming the fix when it names none."""
    if not ref or ref.startswith("-"):
        raise RefError(f"--dmlbench-against: {ref!r} is not a git ref; give a branch, tag or commit, e.g. origin/main")
    done = git(root, "rev-parse", "--verify", "--quiet", "--end-of-options", f"{ref}^{{commit}}", check=False)
    if done.returncode == 0:
        return done.stdout.strip()
    shallow = git(root, "rev-parse", "--is-shallow-repository", check=False).stdout.strip() == "true"
    if shallow:
        raise RefError(
            f"--dmlbench-against: {ref!r} is not in this shallow clone. Fetch it first "
            f"(`git fetch --deepen=50 origin` or `git fetch --unshallow`; in GitHub Actions "
            "`actions/checkout` with `fetch-depth: 0`)."
        )
    raise RefError(
        f"--dmlbench-against: {ref!r} names no commit in {root}. Give a branch, tag or commit that exists "
        "(`git log --oneline` lists commits; fetch remote branches with `git fetch`)."
    )


@dataclass(frozen=True)
class Worktree:
    path: Path
    commit: str


def _store(root: Path) -> Path:
    common = git(root, "rev-parse", "--git-common-dir").stdout.strip()
    folder = (root / common).resolve() / FOLDER
    folder.mkdir(parents=True, exist_ok=True)
    return folder


@contextmanager
def _locked(path: Path, *, blocking: bool = True) -> Iterator[bool]:
    with open(path, "a") as handle:
        flags = fcntl.LOCK_EX | (0 if blocking else fcntl.LOCK_NB)
        try:
            fcntl.flock(handle, flags)
        except BlockingIOError:
            yield False
            return
        try:
            yield True
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _healthy(path: Path, commit: str) -> bool:
    """A complete worktree of ``commit`` with nothing changed in it."""
    if not (path / ".git").exists():
        return False
    head = git(path, "rev-parse", "HEAD", check=False)
    if head.returncode != 0 or head.stdout.strip() != commit:
        return False
    status = git(path, "status", "--porcelain", "--untracked-files=no", check=False)
    return status.returncode == 0 and not status.stdout.strip()


def _remove(root: Path, path: Path) -> None:
    git(root, "worktree", "remove", "--force", str(path), check=False)
    if path.exists():
        shutil.rmtree(path)
    git(root, "worktree", "prune", check=False)


def checkout(root: Path, commit: str) -> Worktree:
    """A worktree of ``commit``, reused when one is cached and intact, (re)made otherwise."""
    store = _store(root)
    path = store / commit
    with _locked(store / f"{commit}.lock"):
        if not _healthy(path, commit):
            if path.exists():
                _remove(root, path)  # left half-made or changed by an earlier, killed run
            git(root, "worktree", "prune", check=False)
            git(root, "worktree", "add", "--detach", "--force", str(path), commit)
        os.utime(path)  # the last use, for removing the least recently used
    prune_cache(root, keep=KEEP, spare=commit)
    return Worktree(path, commit)


def prune_cache(root: Path, keep: int = KEEP, spare: str = "") -> list[Path]:
    """Remove the least recently used cached worktrees beyond ``keep``: never ``spare``, never one used in
    the last :data:`IDLE_S` seconds (a run may still be measuring it), never one being built; returns
    what was removed."""
    store = _store(root)
    cached = sorted((p for p in store.iterdir() if p.is_dir() and p.name != spare),
                    key=lambda p: p.stat().st_mtime, reverse=True)
    removed = []
    for path in cached[max(0, keep - 1):]:
        if time.time() - path.stat().st_mtime < IDLE_S:
            continue
        with _locked(store / f"{path.name}.lock", blocking=False) as mine:
            if mine:
                _remove(root, path)
                removed.append(path)
    return removed
