"""Kept import path: ``pytest_dmlbench.stats`` is :mod:`pytest_dmlbench.results.stats` (the same module object).

Users' tests import it under this name; the package itself imports ``pytest_dmlbench.results.stats``.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

from pytest_dmlbench.results import stats as _moved

if TYPE_CHECKING:
    from pytest_dmlbench.results.stats import *  # noqa: F403

sys.modules[__name__] = _moved
