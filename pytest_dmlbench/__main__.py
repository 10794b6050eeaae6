"""``python -m pytest_dmlbench``: compare and show results outside pytest."""

from __future__ import annotations

from pytest_dmlbench.cli import main

raise SystemExit(main())
