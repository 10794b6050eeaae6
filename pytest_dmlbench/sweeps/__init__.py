"""Sweeps of the data pipeline and batch size (seed 002's tuning studies).

- :func:`max_batch_size`: the largest batch that completes one training step on a device.
- :mod:`pytest_dmlbench.sweeps.loader`: the data-loader sweep's dataset and its saturation rule.
"""

from __future__ import annotations

from pytest_dmlbench.errors import BatchSearchError
from pytest_dmlbench.sweeps.maxbatch import BatchSearch, largest_fitting, max_batch_size

__all__ = ["BatchSearch", "BatchSearchError", "largest_fitting", "max_batch_size"]
