"""Deprecated import path: ``pytest_dmlbench.reference`` is :mod:`pytest_dmlbench.training.reference`
(the same module object).

Importing it warns (``DeprecationWarning``, once per process) and keeps working until pytest-dmlbench 1.0,
which removes it: import ``pytest_dmlbench.training.reference`` instead.
The package and its own cases import the new path only.
"""

from __future__ import annotations

import sys
import warnings
from typing import TYPE_CHECKING

from pytest_dmlbench.training import reference as _moved

if TYPE_CHECKING:
    from pytest_dmlbench.training.reference import *  # noqa: F403

warnings.warn("pytest_dmlbench.reference is deprecated and goes in pytest-dmlbench 1.0: "
              "import pytest_dmlbench.training.reference instead (the same module)", DeprecationWarning, stacklevel=2)
sys.modules[__name__] = _moved
