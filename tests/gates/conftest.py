"""Fixtures shared by the gate tests: inner pytest sessions that several tests judge, run once per outer run."""

from __future__ import annotations

import fcntl
import os
import pickle
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

import pytest

T = TypeVar("T")


class SharedSessions:
    """Inner sessions (their outcomes and the files they wrote) made once per outer pytest run and handed to every
    test that asks for them by key, under pytest-xdist too: the workers share the run's base temporary folder,
    and a file lock per key lets the first worker make it while another waits for it rather than repeating it.
    A session that raises is not kept: the next test to ask makes it again (and fails with its own error)."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.made: dict[str, object] = {}

    def get(self, key: str, make: Callable[[Path], T]) -> tuple[T, Path]:
        """``make(folder)``'s result for ``key`` and the folder it was made in (its files stay there)."""
        folder = self.root / key
        if key not in self.made:
            with open(self.root / f"{key}.lock", "w") as lock:
                fcntl.flock(lock, fcntl.LOCK_EX)
                record = self.root / f"{key}.pickle"
                if record.exists():
                    self.made[key] = pickle.loads(record.read_bytes())
                else:
                    shutil.rmtree(folder, ignore_errors=True)
                    folder.mkdir(parents=True)
                    self.made[key] = make(folder)
                    record.write_bytes(pickle.dumps(self.made[key]))
        return self.made[key], folder  # type: ignore[return-value]


@pytest.fixture(scope="session")
def shared_sessions(tmp_path_factory: pytest.TempPathFactory) -> SharedSessions:
    base = tmp_path_factory.getbasetemp()
    # under pytest-xdist each worker's base folder (popen-gwN) lies in the run's own, which all workers share
    root = (base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base) / "shared-sessions"
    root.mkdir(exist_ok=True)
    return SharedSessions(root)
