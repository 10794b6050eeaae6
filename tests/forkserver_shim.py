"""What a forked inner run starts as ``sys.executable`` (:mod:`tests.forkserver_main`): a ``python -m ...`` or
``python -c ...`` is asked of the fork server, which forks a child that becomes that run with this process's
folder, environment and open file descriptors where it can (:func:`tests.forkserver_main.parse_command`); this
process then stands for the child, ending with its exit status (or its signal) and taking it along when killed.
Anything else, or a run the server will not fork, runs the real interpreter in this process's place.

Started as ``python -I -S forkserver_shim.py SOCKET PYTHON ARGS...``: only the standard library is at hand.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import sys


def open_fds() -> list[int]:
    """This process's open file descriptors (the listing's own one left out)."""
    found = []
    for name in os.listdir("/proc/self/fd"):
        fd = int(name)
        try:
            os.fstat(fd)
        except OSError:
            continue  # the listing's own descriptor, closed by now
        found.append(fd)
    return sorted(found)


def forwarded(args: list[str]) -> bool:
    """Whether to ask the server (which says which it forks): a module or code, or Ray's worker scripts."""
    first = next((arg for arg in args if arg not in ("-u", "-B")), "")
    return first in ("-m", "-c") or os.path.basename(first) in ("setup_worker.py", "default_worker.py")


def main() -> None:
    socket_path, python, args = sys.argv[1], sys.argv[2], sys.argv[3:]
    if not forwarded(args):
        os.execv(python, [python, *args])
    fds = open_fds()
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        conn.connect(socket_path)
    except OSError:  # the server has ended: an interpreter of its own
        os.execv(python, [python, *args])
    lifeline_read, lifeline_write = os.pipe()
    request = {"args": args, "cwd": os.getcwd(), "env": dict(os.environ), "pgid": os.getpgid(0), "fds": fds,
               "python": python}
    socket.send_fds(conn, [json.dumps(request).encode() + b"\n"], [*fds, lifeline_read])
    os.close(lifeline_read)
    replies = conn.makefile("r")
    first = json.loads(replies.readline() or "{}")
    if not first.get("forked"):
        conn.close()
        os.close(lifeline_write)
        os.execv(python, [python, *args])
    for fd in fds:
        if fd > 2:  # the child holds them now; a channel must see its end when the child's end closes
            os.close(fd)
    child = int(first["pid"])
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the child is in this process group: a Ctrl-C reaches it itself
    signal.signal(signal.SIGTERM, lambda signum, frame: os.kill(child, signal.SIGTERM))
    line = replies.readline()
    if not line:
        sys.stderr.write("the fork server ended before the run it forked did\n")
        os._exit(1)
    code = int(json.loads(line)["returncode"])
    if code < 0:  # end as the child did: by its signal
        if -code not in (signal.SIGKILL, signal.SIGSTOP):  # those two cannot be caught: no handler to reset
            signal.signal(-code, signal.SIG_DFL)
        os.kill(os.getpid(), -code)
    os._exit(code if code >= 0 else 1)


if __name__ == "__main__":
    main()
