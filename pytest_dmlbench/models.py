"""Kept import path: ``pytest_dmlbench.models`` is :mod:`pytest_dmlbench.training.models` (the same module object).

Users' tests import it under this name; the package itself imports ``pytest_dmlbench.training.models``.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

from pytest_dmlbench.training import models as _moved

if TYPE_CHECKING:
    from pytest_dmlbench.training.models import *  # noqa: F403

sys.modules[__name__] = _moved
