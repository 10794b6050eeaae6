"""What the end-to-end tests share: inner pytest runs made once per session, also under pytest-xdist."""

from __future__ import annotations

import fcntl
import json
import os
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

BUILT = "built.json"


def once_per_session(tmp_path_factory: pytest.TempPathFactory, name: str,
                     build: Callable[[Path], dict[str, Any]]) -> tuple[Path, dict[str, Any]]:
    """A folder ``name`` that ``build`` fills once for the whole test session, and what it returned (JSON).

    Under pytest-xdist a module's tests may be split between workers, and each would set up a module-scoped
    fixture (inner pytest runs of 5-20 s each) again: the first worker here builds the folder while holding a
    lock, the others wait for it and read the same folder, which they must only read. A build that raised
    left no record and is made again from an empty folder by the next test that asks."""
    base = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        base = base.parent  # the session's folder, above each worker's own
    folder, record = base / name, base / name / BUILT
    with open(base / f"{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not record.exists():
            shutil.rmtree(folder, ignore_errors=True)
            folder.mkdir()
            record.write_text(json.dumps(build(folder)))
        return folder, json.loads(record.read_text())
