"""Where a rank that did not finish is: inside a ``torch.distributed`` call, or somewhere else.

Read from the rank's faulthandler dump (most recent call first), parent side. A rank whose case thread is
in ``torch.distributed`` (or on a line that waits on an asynchronous one, ``work.wait()``) waits in a
collective; a rank elsewhere (a sleep, a loop, a lock of its own) is what the ones in a collective wait for.
"""

from __future__ import annotations

import functools
import importlib.util
import linecache
import os
import re
from dataclasses import dataclass

_FRAME = re.compile(r'^\s*File "(?P<file>.+)", line (?P<line>\d+) in (?P<func>\S+)')
_THREAD = re.compile(r"^(Current thread|Thread) 0x")
_CASE_THREAD_MARK = "pytest_dmlbench/world/execute.py"
# the first frame below the case body: the plugin's own, then the forked pytest frames
BELOW_THE_BODY = ("pytest_dmlbench/properties/body.py", "pytest_dmlbench/world/execute.py",
                  "pytest_dmlbench/world/forked/rank.py")
_WAIT_CALL = re.compile(r"\.wait\(")


@dataclass(frozen=True)
class Frame:
    file: str
    line: int
    func: str

    def __str__(self) -> str:
        return f"{os.path.basename(self.file)}:{self.line} in {self.func}"


@dataclass(frozen=True)
class Place:
    """Where one rank is: the ``torch.distributed`` call it waits in ('' when none) and its line."""

    collective: str
    frame: Frame

    @property
    def in_collective(self) -> bool:
        return bool(self.collective)

    def __str__(self) -> str:
        """A phrase after a subject: 'waits in all_reduce (x.py:8 in f)', 'is outside any collective, at ...'."""
        return f"waits {self.summary()}" if self.in_collective else f"is {self.summary()}"

    def summary(self) -> str:
        """'in all_reduce (x.py:8 in f)' or 'outside any collective, at x.py:7 in f'."""
        if self.in_collective:
            return f"in {self.collective} ({self.frame})"
        return f"outside any collective, at {self.frame}"


def place_of(stack: str) -> Place | None:
    """Where the case thread of a faulthandler dump is; None when the dump has no such thread."""
    frames = _case_frames(stack)
    if not frames:
        return None
    in_dist = [i for i, f in enumerate(frames) if _is_distributed(f.file)]
    if in_dist:
        caller = next((f for f in frames[in_dist[-1] + 1:] if not _is_torch(f.file)), frames[-1])
        c10d = [frames[i] for i in in_dist if frames[i].file.endswith("distributed_c10d.py")]
        named = c10d[-1] if c10d else frames[in_dist[-1]]
        return Place(named.func, caller)
    top = frames[0]
    if _WAIT_CALL.search(linecache.getline(top.file, top.line)):
        return Place("wait() of an asynchronous collective", top)
    return Place("", top)


def _case_frames(stack: str) -> list[Frame]:
    """The frames of the thread running the case, most recent first, cut above the plugin's own frames."""
    if "(most recent call first)" not in stack:
        return []  # not a faulthandler dump (a simulated rank's stack is oldest first)
    threads: list[list[Frame]] = []
    for line in stack.splitlines():
        if _THREAD.match(line.strip()):
            threads.append([])
            continue
        match = _FRAME.match(line)
        if match and threads:
            threads[-1].append(Frame(match["file"].replace("\\", "/"), int(match["line"]), match["func"]))
    case = next((t for t in threads if any(_CASE_THREAD_MARK in f.file for f in t)), threads[0] if threads else [])
    kept = []
    for frame in case:
        if any(mark in frame.file for mark in BELOW_THE_BODY):
            break
        kept.append(frame)
    return kept


def _is_distributed(path: str) -> bool:
    return path.startswith(_torch_dir() + "/distributed/") or "/site-packages/torch/distributed/" in path


def _is_torch(path: str) -> bool:
    return path.startswith(_torch_dir() + "/") or "/site-packages/torch/" in path


@functools.cache
def _torch_dir() -> str:
    """torch's package folder, found without importing torch."""
    spec = importlib.util.find_spec("torch")
    origin = spec.origin if spec is not None else None
    return os.path.dirname(origin).replace("\\", "/") if origin else "/nonexistent-torch"
