"""The cases a world can run, as the ranks see them: inherited through fork, looked up by node id."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class CaseEntry:
    """A case body and its direct parametrize values (which never need pickling)."""

    func: Callable[..., Any]
    argnames: tuple[str, ...]
    params: dict[str, Any]


CaseRegistry = dict[str, CaseEntry]
