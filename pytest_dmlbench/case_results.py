"""Deprecated import path: ``pytest_dmlbench.case_results`` is :mod:`pytest_dmlbench.items.case_results`
(the same module object), where ``LocalMetrics``, the type of the ``dmlbench_metrics`` fixture, lives.

Importing it warns (``DeprecationWarning``, once per process) and keeps working until pytest-dmlbench 1.0,
which removes it: import ``pytest_dmlbench.items.case_results`` instead.
The package and its own cases import the new path only.
"""

from __future__ import annotations

import sys
import warnings
from typing import TYPE_CHECKING

from pytest_dmlbench.items import case_results as _moved

if TYPE_CHECKING:
    from pytest_dmlbench.items.case_results import *  # noqa: F403

warnings.warn("pytest_dmlbench.case_results is deprecated and goes in pytest-dmlbench 1.0: "
              "import pytest_dmlbench.items.case_results instead (the same module)", DeprecationWarning, stacklevel=2)
sys.modules[__name__] = _moved
