"""The memory allocator of the block servers' ranks: the C library's own, or a caching one preloaded.

With glibc's allocator a large tensor is mapped afresh (paying its page faults) or taken from the heap
depending on what that process freed before, so a large collective's speed is drawn once per world and kept
for as long as the world lives: an offset between the two sides that more pairs confirm instead of averaging
away. A caching allocator (tcmalloc) hands back freed memory of the same size whatever ran before. Both block
servers start with the library in ``LD_PRELOAD``; their zygotes and ranks inherit it. The session's own run,
in a process already started, keeps its allocator.

Before a server starts, a short Python process with the same ``LD_PRELOAD`` must show the library among its
mappings: the dynamic loader only warns, and carries on without it, when a preload cannot be loaded.
"""

from __future__ import annotations

import ctypes.util
import os
import subprocess
import sys
from pathlib import Path

from pytest_dmlbench.config import NAMED_ALLOCATORS, SYSTEM_ALLOCATOR
from pytest_dmlbench.errors import ConfigError

OPTION = "--dmlbench-rank-allocator"
PRELOAD_ENV = "LD_PRELOAD"
CHECK_TIMEOUT_S = 60.0
_MAPPINGS = "import sys; sys.stdout.write(open('/proc/self/maps').read())"


def preload_library(choice: str) -> str | None:
    """The library to preload for ``choice`` (None for the C library's own), checked to load."""
    if choice == SYSTEM_ALLOCATOR:
        return None
    if not sys.platform.startswith("linux"):
        raise ConfigError(f"{OPTION} {choice}: preloading an allocator needs Linux ({PRELOAD_ENV}); leave the "
                          f"option out on {sys.platform}")
    if choice in NAMED_ALLOCATORS:
        library = _find(choice)
    elif Path(choice).is_file():
        library = choice
    else:
        raise ConfigError(f"{OPTION}: {choice} does not exist; give the path of the allocator's shared library")
    _check_loads(library)
    return library


def preload_environment(library: str | None) -> tuple[tuple[str, str], ...]:
    """``LD_PRELOAD`` with ``library`` first, ahead of what the user preloads already; nothing for None."""
    if library is None:
        return ()
    existing = os.environ.get(PRELOAD_ENV, "")
    return ((PRELOAD_ENV, f"{library}:{existing}" if existing else library),)


def _find(name: str) -> str:
    allocator = NAMED_ALLOCATORS[name]
    for candidate in allocator.libraries:
        found = ctypes.util.find_library(candidate)
        if found:
            return found
    raise ConfigError(f"{OPTION} {name}: no {name} library found on this machine; install {allocator.package}, or "
                      f"give the library's path ({OPTION} /path/to/lib{allocator.libraries[0]}.so)")


def _check_loads(library: str) -> None:
    """A Python started with ``library`` preloaded maps it; ConfigError with the loader's words otherwise."""
    env = {**os.environ, PRELOAD_ENV: library}
    done = subprocess.run([sys.executable, "-c", _MAPPINGS], env=env, capture_output=True, text=True,
                          timeout=CHECK_TIMEOUT_S, check=False)
    wanted = Path(os.path.realpath(library)).name if "/" in library else library
    mapped = {Path(line.split()[-1]).name for line in done.stdout.splitlines() if line.count("/")}
    if done.returncode != 0 or not any(name.startswith(wanted) for name in mapped):
        said = done.stderr.strip().splitlines()
        raise ConfigError(f"{OPTION}: {library} could not be preloaded"
                          + (f" ({said[-1]})" if said else "")
                          + "; give a shared library of an allocator built for this machine, or leave the option out")
