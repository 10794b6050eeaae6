"""Kept import path: ``pytest_dmlbench.comm`` is :mod:`pytest_dmlbench.measure.comm` (the same module object).

Users' tests import it under this name; the package itself imports ``pytest_dmlbench.measure.comm``.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

from pytest_dmlbench.measure import comm as _moved

if TYPE_CHECKING:
    from pytest_dmlbench.measure.comm import *  # noqa: F403

sys.modules[__name__] = _moved
