"""Strict-JSON files of the results schema: atomic writing and validating reading.

Writing goes to a temporary file in the destination folder, is fsynced and then renamed over the target
(``os.replace`` is atomic on POSIX and Windows), so a reader sees the old file or the new one, never half.
Reading turns every way a file can be unusable into a :class:`BaselineError` that names the file, what is
wrong with it and what to do; it never modifies the file.
"""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from pytest_dmlbench.errors import BaselineError
from pytest_dmlbench.results import SCHEMA_VERSION, RunResults

TEMP_PREFIX = ".tmp-"
OLDER_SCHEMAS = (1,)
OLDER_VERSION_HINT = "Or read it with the pytest-dmlbench that wrote it: pip install 'pytest-dmlbench<0.3'"
FILE_MODE = 0o644


def dumps_strict(document: Any) -> str:
    """Serialise as strict JSON (NaN/inf are rejected: the results model encodes them as strings)."""
    return json.dumps(document, indent=1, sort_keys=False, allow_nan=False) + "\n"


def write_atomic(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` atomically and durably (temp file in the same folder, fsync, rename)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, temp_name = tempfile.mkstemp(dir=path.parent, prefix=TEMP_PREFIX, suffix=".json")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            os.chmod(temp_name, FILE_MODE)  # mkstemp makes 0600; baselines are shared files
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(temp_name, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(temp_name)
        raise
    _fsync_dir(path.parent)


def _fsync_dir(folder: Path) -> None:
    """Make the rename itself durable where the platform allows opening a folder."""
    try:
        dir_fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(dir_fd)
    except OSError:
        pass
    finally:
        os.close(dir_fd)


def write_results(path: Path, results: RunResults) -> None:
    """Write a results document (schema 2) atomically."""
    write_atomic(Path(path), dumps_strict(results.to_dict()))


def _reject_constant(name: str) -> float:
    raise ValueError(f"non-standard JSON constant {name}")


def older_schema_problem(schema: int) -> str:
    """Why a file of an older schema is not read (the first line of its error, after the file name)."""
    return (f"written by an older pytest-dmlbench (schema {schema}, the layout before a baseline's identity held "
            f"world size, launcher and isolation); this version reads schema {SCHEMA_VERSION}. The file is left as "
            "it is")


def read_results(path: Path, fix: str,
                 older_fix: Callable[[Path, Mapping[str, Any]], str] | None = None) -> RunResults:
    """Read and validate a results or baseline file; ``fix`` tells the user what to do if it is unusable,
    ``older_fix(path, document)`` (when given) what to do with a file an older version wrote."""
    path = Path(path)

    def fail(problem: str) -> BaselineError:
        return BaselineError(f"{path}: {problem}.\n{fix}")

    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        raise fail("no such file") from None
    except OSError as exc:
        raise fail(f"cannot be read ({exc.strerror or exc})") from exc
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise fail(f"is not UTF-8 text (byte {exc.start})") from exc
    if not text.strip():
        raise fail("is empty (a truncated or interrupted write)")
    try:
        document = json.loads(text, parse_constant=_reject_constant)
    except (json.JSONDecodeError, ValueError) as exc:
        raise fail(f"is not valid JSON ({exc}); it may be truncated or corrupt") from exc
    if not isinstance(document, dict):
        raise fail(f"holds a JSON {type(document).__name__}, expected an object with 'schema' and 'cases'")
    if "schema" not in document and "cases" not in document:
        keys = ", ".join(sorted(map(str, document))[:6]) or "none"
        raise fail(f"is not a pytest-dmlbench results or baseline file: it has neither 'schema' nor 'cases' "
                   f"(its keys: {keys})")
    schema = document.get("schema")
    if type(schema) is int and schema in OLDER_SCHEMAS:  # not True, which equals 1
        advice = older_fix(path, document) if older_fix is not None else fix
        raise BaselineError(f"{path}: {older_schema_problem(schema)}.\n{advice}\n{OLDER_VERSION_HINT}")
    if schema != SCHEMA_VERSION:
        raise fail(
            f"has schema {schema!r}, but this version of pytest-dmlbench reads schema {SCHEMA_VERSION} "
            "(written by an older or newer version)"
        )
    try:
        return RunResults.from_dict(document)
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        missing = f"missing field {exc}" if isinstance(exc, KeyError) else str(exc)
        raise fail(f"does not match the results schema ({missing})") from exc
