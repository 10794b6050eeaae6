"""Where a run writes (``--dmlbench-json``, ``--dmlbench-plots``, the baselines it saves), checked before the
first case runs, so a path that cannot be written fails in a second, not after the run with its results lost.

The check writes for real: it makes the missing folders and a file in the target folder, then removes what it
made. Asking ``os.access`` is not enough: root is granted every access, yet cannot write under ``/proc`` or on
a read-only mount.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from pathlib import Path

from pytest_dmlbench.errors import ConfigError

PROBE_PREFIX = ".dmlbench-probe-"


def _nearest_existing(path: Path) -> Path:
    for candidate in [path, *path.parents]:
        if candidate.exists():
            return candidate
    return Path(path.anchor or ".")


def _reason(exc: OSError) -> str:
    return exc.strerror or str(exc)


def _probe_folder(folder: Path, option: str, shown: Path) -> None:
    """Make ``folder`` where missing and a file in it, then remove both; ConfigError naming the fix."""
    existing = _nearest_existing(folder)
    if not existing.is_dir():
        raise ConfigError(f"{option} {shown}: {existing} is a file, not a folder; choose a path under a folder")
    fix = "choose a path in a folder this user can write"
    made = [parent for parent in [folder, *folder.parents] if not parent.exists()]
    try:
        for new in reversed(made):
            try:
                new.mkdir()
            except OSError as exc:
                raise ConfigError(f"{option} {shown}: cannot make the folder {new} ({_reason(exc)}); {fix}") from None
        try:
            handle, probe = tempfile.mkstemp(dir=folder, prefix=PROBE_PREFIX)
        except OSError as exc:
            raise ConfigError(f"{option} {shown}: cannot write a file in {folder} ({_reason(exc)}); {fix}") from None
        os.close(handle)
        os.unlink(probe)
    finally:
        for new in made:  # deepest first; only what this check made, and only if still empty
            with contextlib.suppress(OSError):
                new.rmdir()


def check_file_target(path: Path, option: str) -> None:
    """``path`` can be written as a file (its folder made where missing); ConfigError naming the fix."""
    if path.is_dir():
        raise ConfigError(f"{option} {path}: is a folder; give a file path such as {path / 'results.json'}")
    if path.exists() and not os.access(path, os.W_OK):
        raise ConfigError(f"{option} {path}: the file exists and is not writable by this user; "
                          "choose another path or make it writable")
    _probe_folder(path.parent, option, path)


def check_folder_target(path: Path, option: str) -> None:
    """``path`` can be used as an output folder (made where missing); ConfigError naming the fix."""
    if path.exists() and not path.is_dir():
        raise ConfigError(f"{option} {path}: is a file, not a folder; give a folder path")
    _probe_folder(path, option, path)
