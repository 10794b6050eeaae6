"""Counting CUDA devices without initialising CUDA in this process, so that it can still fork ranks.

``torch.cuda.device_count()`` asks NVML first, but where NVML cannot answer (a CUDA build of torch on a
machine without the NVIDIA driver: the default wheel on most CPU-only CI runners) it falls back to the CUDA
runtime, and from then on every forked child fails its first CUDA call with "Cannot re-initialize CUDA in
forked subprocess", whatever the real problem is. So the count is made in a short child process: forked when
this process runs one thread (the zygote: torch is loaded, the fork costs milliseconds), a new interpreter
otherwise (forking a threaded process is unsafe). The child's CUDA state dies with it.
"""

from __future__ import annotations

import os
import select
import signal
import subprocess
import sys
import threading
import time
import traceback

from pytest_dmlbench.errors import WorldError

COUNT_TIMEOUT_S = 120.0
_CHILD_CODE = "import torch; print(torch.cuda.device_count())"


def cuda_device_count(timeout_s: float = COUNT_TIMEOUT_S) -> int:
    """Visible CUDA devices, as ``torch.cuda.device_count()`` counts them, leaving this process fork-safe.

    0 without a CUDA build of torch. Raises :class:`WorldError` when the counting child fails or hangs."""
    import torch

    if not torch.backends.cuda.is_built():  # type: ignore[no-untyped-call]
        return 0
    if torch.cuda.is_initialized():  # type: ignore[no-untyped-call] # nothing left to protect here
        return int(torch.cuda.device_count())
    if threading.active_count() == 1:
        return _count_in_forked_child(timeout_s)
    return _count_in_new_interpreter(timeout_s)


def _count_in_forked_child(timeout_s: float) -> int:
    read_end, write_end = os.pipe()
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - runs in the child
        status = 1
        try:
            os.close(read_end)
            import torch

            text = f"{int(torch.cuda.device_count())}\n"
            status = 0
        except BaseException:
            text = traceback.format_exc()
        try:
            os.write(write_end, text.encode())
        finally:
            os._exit(status)
    os.close(write_end)
    try:
        text = _read_all(read_end, pid, timeout_s)
    finally:
        os.close(read_end)
    _, status = os.waitpid(pid, 0)
    return _parse(text, f"the forked child that counts CUDA devices ended with status {status}")


def _read_all(fd: int, pid: int, timeout_s: float) -> str:
    chunks: list[bytes] = []
    deadline = time.monotonic() + timeout_s
    while True:
        remaining = deadline - time.monotonic()
        ready, _, _ = select.select([fd], [], [], max(0.0, remaining))
        if not ready:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            raise WorldError(f"counting CUDA devices (torch.cuda.device_count() in a forked child) did not finish "
                             f"within {timeout_s:.0f} s; check the NVIDIA driver (nvidia-smi), or hide the GPUs "
                             "with CUDA_VISIBLE_DEVICES= to run on gloo")
        chunk = os.read(fd, 65536)
        if not chunk:
            return b"".join(chunks).decode(errors="replace")
        chunks.append(chunk)


def _count_in_new_interpreter(timeout_s: float) -> int:
    try:
        done = subprocess.run([sys.executable, "-c", _CHILD_CODE], capture_output=True, text=True,
                              timeout=timeout_s, check=False)
    except subprocess.TimeoutExpired as exc:
        raise WorldError(f"counting CUDA devices ({sys.executable} -c {_CHILD_CODE!r}) did not finish within "
                         f"{timeout_s:.0f} s; check the NVIDIA driver (nvidia-smi), or hide the GPUs with "
                         "CUDA_VISIBLE_DEVICES= to run on gloo") from exc
    return _parse(done.stdout if done.returncode == 0 else done.stdout + done.stderr,
                  f"{sys.executable} -c {_CHILD_CODE!r} exited with status {done.returncode}")


def _parse(text: str, how: str) -> int:
    last = text.strip().splitlines()[-1:] or [""]
    if last[0].isdigit():
        return int(last[0])
    raise WorldError(f"counting CUDA devices failed: {how}:\n{text.rstrip()}\n"
                     "Fix the CUDA installation, or hide the GPUs with CUDA_VISIBLE_DEVICES= to run on gloo")
