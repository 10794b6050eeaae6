"""The message form between A (the user's pytest run) and B (a pytest process running REF's code).

A and B may run different versions of this plugin (a repository that tests pytest-dmlbench with itself),
so nothing but these messages crosses between them: one JSON object per line, over two pipes whose file
descriptors B finds in ``DMLBENCH_PAIRED_FDS`` (``"<read>,<write>"``). Numbers may be ``NaN`` or
``Infinity`` as Python's ``json`` writes them. Protocol version 1:

B -> A, once, when B has collected its cases and started its rank processes::

    {"type": "hello", "protocol": 1, "plugin_version": "0.2.0", "plugin_file": "...", "in_process_blocks": true,
     "cases": [{"nodeid": "tests/test_x.py::test_step[4]", "file": "/abs/path/tests/test_x.py"}, ...]}

(A matches cases by the file relative to each tree's root plus the node id's part after the file, since
node ids depend on the rootdir each run derives from its arguments; ``block`` names B's node id.)

A -> B, any number of times (B answers each before reading the next)::

    {"type": "block", "nodeid": "tests/test_x.py::test_step[4]", "rounds": 40, "warmup": 2, "iterations": 1}

(``iterations``: at least this many calls per round for ``dmlbench(fn)`` / ``pedantic``; 1 when absent.
Optional, ignored by servers that predate them: ``"whole_experiment": true`` trains experiments in full;
``"profile": true`` runs the block under the operator profiler, and the result then carries
``"profile": {"wall_s": ..., "seconds": {...}, "calls": {...}}`` (rank 0's; servers that profile say
``"profiles_blocks": true`` in their hello); ``"fresh_world": true`` stops the world the server keeps before the
block, so that the block runs on newly started ranks (servers that do say ``"redraws_worlds": true``; cases
recorded in the pytest process have no world, and run as ever).)

B -> A, the answer: ``status`` is passed, failed, skipped or unknown (no such case in REF)::

    {"type": "result", "nodeid": "...", "status": "passed", "message": "", "elapsed_s": 0.31,
     "metrics": {"step_time_s": {"unit": "s", "better": "lower", "samples": [0.0042, ...]}}}

A -> B, last: ``{"type": "end"}``; B tears its cases down and exits. B exits too when its read pipe
closes (A ended). B -> A ``{"type": "error", "message": "..."}`` reports a problem that ends B.

A version bump is needed for any change a version-1 peer would misread; B announces its version and A
refuses any other with an error naming the version it needs. The messages are typed below (one TypedDict
each; fields a later release added are ``NotRequired``, since a peer may predate them), and every message
received is checked against its type: a missing or mistyped field is a :class:`ProtocolError` naming it.
"""

from __future__ import annotations

import functools
import json
import os
import select
import time
import types
from typing import Any, Literal, TypedDict, Union, cast, get_args, get_origin, get_type_hints

PROTOCOL_VERSION = 1
FDS_ENV = "DMLBENCH_PAIRED_FDS"
SERVER_PLUGIN = "pytest_dmlbench.block_server.plugin"  # the block server B's pytest loads (-p)
# where the block server was before it had a folder named for it: REF trees of pytest-dmlbench 0.4.0 and earlier
# hold it only there, so A asks for it there when REF's tree lacks the module above (client.server_plugin)
LEGACY_SERVER_PLUGIN = "pytest_dmlbench.paired.server"
FIRST_PLUGIN_VERSION = "0.2.0"  # the first pytest-dmlbench release that serves protocol 1


class ProtocolError(Exception):
    """The peer sent something that is not a message of this protocol, or went away."""


class CaseEntry(TypedDict):
    nodeid: str
    file: str


# Each message's required fields, then (``total=False``) the fields a later release added, which a peer may
# not send: two classes each, since ``NotRequired`` is not seen under postponed annotations.
class _HelloFields(TypedDict):
    type: Literal["hello"]
    protocol: int
    plugin_version: str
    plugin_file: str
    cases: list[CaseEntry]


class Hello(_HelloFields, total=False):
    """B -> A once: B's version and its cases."""

    in_process_blocks: bool  # serves blocks of figures recorded in the pytest process
    budgeted_experiments: bool  # trains experiment files within a block's budget
    profiles_blocks: bool  # answers ``"profile": true`` with the block's operator profile
    redraws_worlds: bool  # honours ``"fresh_world": true``: the block runs on a newly started world


class _BlockRequestFields(TypedDict):
    type: Literal["block"]
    nodeid: str
    rounds: int
    warmup: int


class BlockRequest(_BlockRequestFields, total=False):
    """A -> B: run one block of a case."""

    iterations: int
    whole_experiment: bool
    profile: bool
    fresh_world: bool


class _BlockAnswerFields(TypedDict):
    type: Literal["result"]
    nodeid: str
    status: str
    message: str
    elapsed_s: float
    metrics: dict[str, dict[str, Any]]


class BlockAnswer(_BlockAnswerFields, total=False):
    """B -> A: what the block measured, or why it did not pass."""

    profile: dict[str, Any]


class End(TypedDict):
    """A -> B, last."""

    type: Literal["end"]


class ErrorMessage(TypedDict):
    """B -> A: a problem that ends B."""

    type: Literal["error"]
    message: str


Message = Hello | BlockRequest | BlockAnswer | End | ErrorMessage
MESSAGE_TYPES: dict[str, type] = {"hello": Hello, "block": BlockRequest, "result": BlockAnswer, "end": End,
                                  "error": ErrorMessage}


def _fits(value: Any, annotation: Any) -> bool:
    origin = get_origin(annotation)
    if origin is Literal:
        return value in get_args(annotation)
    if origin in (Union, types.UnionType):
        return any(_fits(value, arm) for arm in get_args(annotation))
    if annotation is Any:
        return True
    if annotation is float:
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if annotation is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if origin is list:
        (item,) = get_args(annotation)
        return isinstance(value, list) and all(_fits(entry, item) for entry in value)
    if origin is dict:
        return isinstance(value, dict)
    if isinstance(annotation, type) and hasattr(annotation, "__required_keys__"):  # a nested TypedDict
        return isinstance(value, dict) and not _problems(value, annotation)
    return isinstance(value, annotation)


@functools.cache
def _hints(kind: Any) -> dict[str, Any]:
    """A message type's field types, evaluated once (annotations are strings here)."""
    return get_type_hints(kind)


def _problems(message: dict[str, Any], kind: Any) -> list[str]:
    hints = _hints(kind)
    found = [f"no {name!r}" for name in sorted(kind.__required_keys__) if name not in message]
    found += [f"{name!r} is {message[name]!r}, not {getattr(hint, '__name__', hint)}"
              for name, hint in hints.items() if name in message and not _fits(message[name], hint)]
    return found


def checked(message: dict[str, Any]) -> Message:
    """``message`` as the protocol message its ``type`` names; ProtocolError naming what is missing or wrong.
    Fields beyond the type's are allowed (a newer peer may send more)."""
    kind = MESSAGE_TYPES.get(str(message.get("type")))
    if kind is Hello and message.get("protocol") != PROTOCOL_VERSION:
        return cast(Message, message)  # another version's hello: the client refuses it, naming the version
    if kind is None:
        raise ProtocolError(f"unknown message type {message.get('type')!r}; known: {', '.join(MESSAGE_TYPES)}")
    problems = _problems(message, kind)
    if problems:
        raise ProtocolError(f"a {message['type']!r} message with {'; '.join(problems)}: {str(message)[:300]}")
    return cast(Message, message)


class Channel:
    """One end of the two pipes: ``send`` a message, ``receive`` the next one (with a deadline)."""

    def __init__(self, read_fd: int, write_fd: int) -> None:
        self.read_fd = read_fd
        self.write_fd = write_fd
        self._buffer = b""

    def send(self, message: Message) -> None:
        data = (json.dumps(message, separators=(",", ":")) + "\n").encode("utf-8")
        view = memoryview(data)
        while view:
            written = os.write(self.write_fd, view)
            view = view[written:]

    def receive(self, timeout_s: float | None = None) -> Message:
        """The next message, checked against its type; ProtocolError when it is not one of this protocol,
        the peer closed its end or ``timeout_s`` passed."""
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        while b"\n" not in self._buffer:
            remaining = None if deadline is None else max(0.0, deadline - time.monotonic())
            ready, _, _ = select.select([self.read_fd], [], [], remaining)
            if not ready:
                raise ProtocolError(f"no message within {timeout_s:.0f} s")
            chunk = os.read(self.read_fd, 1 << 16)
            if not chunk:
                raise ProtocolError("the other side closed the connection")
            self._buffer += chunk
        line, self._buffer = self._buffer.split(b"\n", 1)
        try:
            message = json.loads(line)
        except ValueError as exc:
            raise ProtocolError(f"not a JSON message: {line[:200]!r} ({exc})") from None
        if not isinstance(message, dict) or not isinstance(message.get("type"), str):
            raise ProtocolError(f"not a message object with a 'type': {line[:200]!r}")
        return checked(message)

    def close(self) -> None:
        for fd in (self.read_fd, self.write_fd):
            try:
                os.close(fd)
            except OSError:
                pass


def channel_from_env(environ: dict[str, str] | os._Environ[str]) -> Channel | None:
    """B's end, from ``DMLBENCH_PAIRED_FDS``; None when the variable is absent."""
    value = environ.get(FDS_ENV)
    if not value:
        return None
    read_fd, write_fd = (int(part) for part in value.split(","))
    return Channel(read_fd, write_fd)
