"""The git commit a run's figures come from, recorded in results and baseline files (``run.commit``).

``--dmlbench-against baseline`` re-measures this commit. Files written before it was recorded have no such
field and stay valid (schema 1).
"""

from __future__ import annotations

import functools
import subprocess
from pathlib import Path


@functools.lru_cache(maxsize=8)
def head_commit(path: Path) -> str | None:
    """The commit checked out at ``path`` (HEAD), or None outside a git repository or without git."""
    try:
        done = subprocess.run(["git", "rev-parse", "--verify", "--quiet", "HEAD"], cwd=path, capture_output=True,
                              text=True, timeout=30, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    commit = done.stdout.strip()
    return commit if done.returncode == 0 and commit else None


def commit_fact(path: Path) -> dict[str, str]:
    """``{"commit": sha}`` for the ``run`` section of results and baselines, or nothing outside git."""
    commit = head_commit(Path(path))
    return {} if commit is None else {"commit": commit}
