"""pytest entry point of pytest-dmlbench (being built; see the world engine)."""

from __future__ import annotations
