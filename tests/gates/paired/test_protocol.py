"""The paired protocol's messages: their schema is pinned, and a message that breaks it is named."""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import pytest

from pytest_dmlbench.gates.paired.protocol import (
    MESSAGE_TYPES,
    PROTOCOL_VERSION,
    Channel,
    ProtocolError,
    checked,
)

# Protocol 1 as peers of every release since 0.2.0 read it. Changing a required field, or making an optional
# one required, is something a version-1 peer would misread: bump PROTOCOL_VERSION instead of this table.
SCHEMA_V1 = {
    "hello": ({"type", "protocol", "plugin_version", "plugin_file", "cases"},
              {"in_process_blocks", "budgeted_experiments", "profiles_blocks", "redraws_worlds"}),
    "block": ({"type", "nodeid", "rounds", "warmup"}, {"iterations", "whole_experiment", "profile", "fresh_world"}),
    "result": ({"type", "nodeid", "status", "message", "elapsed_s", "metrics"}, {"profile"}),
    "end": ({"type"}, set()),
    "error": ({"type", "message"}, set()),
}

HELLO: dict[str, Any] = {"type": "hello", "protocol": 1, "plugin_version": "0.3.0", "plugin_file": "/x/__init__.py",
                         "cases": [{"nodeid": "t.py::test_a", "file": "/r/t.py"}], "profiles_blocks": True}
EXAMPLES: list[dict[str, Any]] = [
    HELLO,
    {"type": "block", "nodeid": "t.py::test_a", "rounds": 40, "warmup": 2, "iterations": 1},
    {"type": "result", "nodeid": "t.py::test_a", "status": "passed", "message": "", "elapsed_s": 0.31,
     "metrics": {"step_time_s": {"unit": "s", "better": "lower", "samples": [0.0042, float("nan")]}}},
    {"type": "end"},
    {"type": "error", "message": "REF's cases did not collect"},
]


@pytest.fixture
def pipe() -> Iterator[tuple[Channel, Channel]]:
    a_read, b_write = os.pipe()
    b_read, a_write = os.pipe()
    a, b = Channel(a_read, a_write), Channel(b_read, b_write)
    yield a, b
    a.close()
    b.close()


def test_the_schema_is_the_one_version_1_peers_read() -> None:
    assert PROTOCOL_VERSION == 1
    found = {name: (set(kind.__required_keys__), set(kind.__optional_keys__))  # type: ignore[attr-defined]
             for name, kind in MESSAGE_TYPES.items()}
    assert found == SCHEMA_V1


@pytest.mark.parametrize("message", EXAMPLES, ids=[m["type"] for m in EXAMPLES])
def test_each_message_crosses_the_pipes_as_it_was_sent(pipe: tuple[Channel, Channel], message: dict[str, Any]) -> None:
    a, b = pipe
    b.send(message)  # type: ignore[arg-type]
    received = a.receive(5.0)
    assert str(received) == str(message)  # NaN != NaN: compare the text


@pytest.mark.parametrize(("message", "problem"), [
    ({k: v for k, v in HELLO.items() if k != "cases"}, "a 'hello' message with no 'cases'"),
    # the first protocol-1 servers' form
    ({**HELLO, "cases": ["t.py::test_a"]}, "'cases' is ['t.py::test_a'], not list"),
    ({"type": "block", "nodeid": "n", "rounds": "40", "warmup": 2}, "'rounds' is '40', not int"),
    ({"type": "block", "nodeid": "n", "rounds": True, "warmup": 2}, "'rounds' is True, not int"),
    ({"type": "result", "nodeid": "n", "status": "passed", "message": "", "elapsed_s": "0.3", "metrics": {}},
     "'elapsed_s' is '0.3', not float"),
    ({"type": "block", "nodeid": "n", "warmup": 2}, "no 'rounds'"),
    ({"type": "sleep"}, "unknown message type 'sleep'; known: hello, block, result, end, error"),
])
def test_a_message_that_breaks_the_schema_is_named(message: dict[str, Any], problem: str) -> None:
    """Negative controls: each kind of break is caught and the field named."""
    with pytest.raises(ProtocolError) as raised:
        checked(message)
    assert problem in str(raised.value)


def test_fields_a_newer_peer_adds_pass() -> None:
    assert checked({**HELLO, "a_later_feature": True})["type"] == "hello"


def test_a_hello_of_another_version_is_left_to_the_version_check() -> None:
    """A protocol-2 hello may look different; the client's refusal names the version, not a field."""
    other = {"type": "hello", "protocol": 2, "plugin_version": "9.0"}
    assert checked(other) == other


def test_a_broken_line_on_the_pipe_is_a_protocol_error(pipe: tuple[Channel, Channel]) -> None:
    a, b = pipe
    os.write(b.write_fd, b'{"type": "block", "nodeid": "n"}\n')
    with pytest.raises(ProtocolError, match="no 'rounds'"):
        a.receive(5.0)
