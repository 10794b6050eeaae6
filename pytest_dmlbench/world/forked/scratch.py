"""The session's scratch folder for its worlds, and the removal of those that killed sessions left behind.

A session removes its folder when it closes; one killed outright (SIGKILL: a CI time limit, the
out-of-memory killer, the paired gate ending a block server that stopped answering) cannot. The next
session that starts worlds removes every such folder of this user whose session process no longer exists.
"""

from __future__ import annotations

import os
import re
import shutil
import tempfile

PREFIX = "dmlbench-"
_NAME = re.compile(rf"^{PREFIX}(\d+)-[^/]+$")


def new_scratch_folder() -> str:
    """A fresh folder named for this process (its pid tells a later session whether it is still in use)."""
    return tempfile.mkdtemp(prefix=f"{PREFIX}{os.getpid()}-")


def _process_exists(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process
        return True
    return True


def abandoned_scratch_folders(parent: str | None = None) -> list[str]:
    """This user's scratch folders in ``parent`` (the temporary folder) whose session process has ended."""
    parent = parent or tempfile.gettempdir()
    found = []
    try:
        entries = list(os.scandir(parent))
    except OSError:
        return []
    for entry in entries:
        match = _NAME.match(entry.name)
        if match is None or int(match.group(1)) == os.getpid():
            continue
        try:
            if not entry.is_dir(follow_symlinks=False) or entry.stat(follow_symlinks=False).st_uid != os.getuid():
                continue
        except OSError:
            continue
        if not _process_exists(int(match.group(1))):
            found.append(entry.path)
    return sorted(found)


def remove_abandoned_scratch_folders(parent: str | None = None) -> int:
    """Remove the folders :func:`abandoned_scratch_folders` finds; returns how many there were."""
    folders = abandoned_scratch_folders(parent)
    for folder in folders:
        shutil.rmtree(folder, ignore_errors=True)
    return len(folders)
