"""What the end-to-end tests share: inner pytest runs made once per session, also under pytest-xdist."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import shared_sessions_of


def once_per_session(tmp_path_factory: pytest.TempPathFactory, name: str,
                     build: Callable[[Path], dict[str, Any]]) -> tuple[Path, dict[str, Any]]:
    """A folder ``name`` that ``build`` fills once for the whole test session, and what it returned; the tests
    that share it must only read it (:class:`tests.conftest.SharedSessions`)."""
    built, folder = shared_sessions_of(tmp_path_factory).get(name, build)
    return folder, built
