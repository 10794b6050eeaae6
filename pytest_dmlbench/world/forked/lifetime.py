"""Process lifetime guards: children die with their parent, whatever killed it."""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import signal

_PR_SET_PDEATHSIG = 1


def die_with_parent(expected_parent: int) -> None:
    """Ask the kernel to SIGKILL this process when its parent exits (Linux); exit now if it already has."""
    libc_name = ctypes.util.find_library("c")
    if libc_name:
        libc = ctypes.CDLL(libc_name, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if os.getppid() != expected_parent:
        os._exit(70)


def detach_from_terminal_signals() -> None:
    """Ctrl-C goes to the parent, which tears the worlds down; ranks must not die mid-collective on their own."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTSTP, signal.SIG_IGN)


def describe_status(status: int) -> str:
    """Human wording of an ``os.waitpid`` status: 'exit code 3' or 'killed by signal 9 (SIGKILL)'."""
    if os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        try:
            name = signal.Signals(sig).name
        except ValueError:
            name = "unknown"
        return f"killed by signal {sig} ({name})"
    if os.WIFEXITED(status):
        return f"exit code {os.WEXITSTATUS(status)}"
    return f"wait status {status}"
