"""Kept import path: ``pytest_dmlbench.reference`` is :mod:`pytest_dmlbench.training.reference`
(the same module object).

Users' tests import it under this name; the package itself imports ``pytest_dmlbench.training.reference``.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

from pytest_dmlbench.training import reference as _moved

if TYPE_CHECKING:
    from pytest_dmlbench.training.reference import *  # noqa: F403

sys.modules[__name__] = _moved
