"""Reading a results file a study is given: the JSON ``--dmlbench-json`` writes, or its gzipped copy (``.gz``, as
the recordings in ``studies/recordings/`` are kept)."""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any


def read_results(path: Path) -> dict[str, Any]:
    """The results document at ``path``; raises ``OSError`` or ``ValueError`` (bad gzip, bad JSON) as it finds them."""
    raw = path.read_bytes()
    document: dict[str, Any] = json.loads(gzip.decompress(raw) if path.suffix == ".gz" else raw)
    return document
