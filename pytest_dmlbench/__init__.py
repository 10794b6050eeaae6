"""pytest-dmlbench: distributed-training cases on real torch.distributed worlds."""

from __future__ import annotations

__version__ = "0.4.0"
