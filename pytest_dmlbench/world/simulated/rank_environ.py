"""Each simulated rank's own environment: ``os.environ`` seen through a per-thread view while a world runs.

Simulated ranks are threads of one process, and the environment is the process's. While a simulated world runs,
:func:`installed` puts a :class:`RankEnviron` in ``os.environ`` (``os.getenv`` reads it too); a rank thread that
called :meth:`RankEnviron.bind` reads the process environment with its own variables on top (torchrun's, from
``world/torchrun_env.py``), and what it sets or deletes stays its own; a thread the rank starts shares the
rank's environment, as a process's threads do. Other threads (the host) see and change the process environment
as before. A child process a rank starts through ``subprocess`` without ``env=`` gets the rank's environment
(the view is passed as its ``env``).

Not per rank (said in the how-to): ``os.environb``, C code that calls ``getenv`` (it reads the process
environment), children started by ``os.system``/``os.exec*``/``os.spawn*``, and modules that took
``from os import environ`` before the world began (they hold the process mapping).
"""

from __future__ import annotations

import functools
import os
import subprocess
import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

_DELETED = None  # an overlay value: the rank deleted the variable


class RankEnviron(os._Environ[str]):
    """``os.environ`` with a per-thread overlay: a bound thread's own variables on top of the process's."""

    def __init__(self, base: os._Environ[str]) -> None:
        environ: Any = base  # the private codec attributes are not in the stubs
        super().__init__(environ._data, environ.encodekey, environ.decodekey, environ.encodevalue,
                         environ.decodevalue)
        self.base = base
        self._local = threading.local()

    def bind(self, variables: Mapping[str, str]) -> None:
        """The calling thread (a rank) reads ``variables`` over the process environment from now on."""
        self._local.overlay = dict(variables)

    def share(self, overlay: dict[str, str | None]) -> None:
        """The calling thread reads and writes ``overlay``, a rank's own (a thread that rank started)."""
        self._local.overlay = overlay

    def unbind(self) -> None:
        self._local.overlay = None

    def _overlay(self) -> dict[str, str | None] | None:
        return getattr(self._local, "overlay", None)

    def __getitem__(self, key: str) -> str:
        overlay = self._overlay()
        if overlay is not None and key in overlay:
            value = overlay[key]
            if value is _DELETED:
                raise KeyError(key)
            return value
        return self.base[key]

    def __setitem__(self, key: str, value: str) -> None:
        overlay = self._overlay()
        if overlay is None:
            self.base[key] = value
            return
        self.encodekey(key)  # the TypeError os.environ gives a non-str
        self.encodevalue(value)
        overlay[key] = value

    def __delitem__(self, key: str) -> None:
        overlay = self._overlay()
        if overlay is None:
            del self.base[key]
            return
        if key not in self:
            raise KeyError(key)
        overlay[key] = _DELETED

    def __iter__(self) -> Iterator[str]:
        overlay = self._overlay()
        if overlay is None:
            yield from self.base
            return
        for key in list(self.base):
            if key not in overlay:
                yield key
        for key, value in list(overlay.items()):
            if value is not _DELETED:
                yield key

    def __len__(self) -> int:
        return sum(1 for _ in self)

    def __repr__(self) -> str:
        return f"environ({dict(self)!r})"

    def copy(self) -> dict[str, str]:
        return dict(self)


def _with_rank_environment(init: Any) -> Any:
    """``Popen.__init__`` that gives a child started by a rank without ``env=`` the rank's environment."""

    @functools.wraps(init)
    def __init__(self: subprocess.Popen[Any], *args: Any, **kwargs: Any) -> None:
        environ = os.environ
        if (kwargs.get("env") is None and len(args) <= _ENV_POSITION and isinstance(environ, RankEnviron)
                and environ._overlay() is not None):
            kwargs["env"] = dict(environ)
        init(self, *args, **kwargs)

    return __init__


_ENV_POSITION = 10  # env's index among Popen's parameters after self (args, bufsize, ..., cwd, env)


def _sharing_the_rank_environment(start: Any) -> Any:
    """``Thread.start`` that gives a thread started by a rank that rank's environment (the same overlay)."""

    @functools.wraps(start)
    def start_thread(self: threading.Thread) -> None:
        view = os.environ
        overlay = view._overlay() if isinstance(view, RankEnviron) else None
        if isinstance(view, RankEnviron) and overlay is not None:
            thread: Any = self  # its run is wrapped for this start
            run = thread.run

            def run_as_rank() -> None:
                view.share(overlay)
                run()

            thread.run = run_as_rank
        start(self)

    return start_thread


@contextmanager
def installed() -> Iterator[RankEnviron]:
    """``os.environ`` is a :class:`RankEnviron` inside the block; the process mapping comes back after."""
    base = os.environ
    if isinstance(base, RankEnviron):
        raise RuntimeError("a simulated world is already running in this process: simulated worlds run one at "
                           "a time; run the cases one after the other")
    view = RankEnviron(base)
    popen: Any = subprocess.Popen  # its __init__ and Thread.start are replaced for the block
    thread: Any = threading.Thread
    popen_init, thread_start = popen.__init__, thread.start
    os.environ = view  # noqa: B003 - a view over the same environment, not a new one
    popen.__init__ = _with_rank_environment(popen_init)
    thread.start = _sharing_the_rank_environment(thread_start)
    try:
        yield view
    finally:
        popen.__init__, thread.start = popen_init, thread_start
        os.environ = base  # noqa: B003 - the process mapping back
