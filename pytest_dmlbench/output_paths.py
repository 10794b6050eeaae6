"""Where a run writes (``--dmlbench-json``, ``--dmlbench-plots``), checked before the first case runs, so a
path that cannot be written fails in a second, not after the run with its results lost."""

from __future__ import annotations

import os
from pathlib import Path

from pytest_dmlbench.errors import ConfigError


def _nearest_existing(path: Path) -> Path:
    for candidate in [path, *path.parents]:
        if candidate.exists():
            return candidate
    return Path(path.anchor or ".")


def _writable_folder(folder: Path, option: str, shown: Path) -> None:
    """``folder`` exists or can be made: its nearest existing ancestor is a folder this process may write."""
    existing = _nearest_existing(folder)
    if not existing.is_dir():
        raise ConfigError(f"{option} {shown}: {existing} is a file, not a folder; choose a path under a folder")
    if not os.access(existing, os.W_OK | os.X_OK):
        raise ConfigError(f"{option} {shown}: the folder {existing} is not writable by this user; "
                          "choose a path in a folder you can write")


def check_file_target(path: Path, option: str) -> None:
    """``path`` can be written as a file (its folder made where missing); ConfigError naming the fix."""
    if path.is_dir():
        raise ConfigError(f"{option} {path}: is a folder; give a file path such as {path / 'results.json'}")
    if path.exists() and not os.access(path, os.W_OK):
        raise ConfigError(f"{option} {path}: the file exists and is not writable by this user; "
                          "choose another path or make it writable")
    _writable_folder(path.parent, option, path)


def check_folder_target(path: Path, option: str) -> None:
    """``path`` can be used as an output folder (made where missing); ConfigError naming the fix."""
    if path.exists() and not path.is_dir():
        raise ConfigError(f"{option} {path}: is a file, not a folder; give a folder path")
    _writable_folder(path, option, path)
