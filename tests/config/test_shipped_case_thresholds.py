"""``ci/case_thresholds.json``, the per-case thresholds measured from the recorded A/A nights: the plugin reads it,
and every case it lists is still one of ``bench_cases`` (a renamed case would quietly keep the run's thresholds)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from pytest_dmlbench.config.case_thresholds import load_case_thresholds

ROOT = Path(__file__).resolve().parents[2]
SHIPPED = ROOT / "ci" / "case_thresholds.json"


def unknown_cases(document: dict[str, Any], root: Path) -> list[str]:
    """The listed node ids whose file is gone or no longer defines the test (or the experiment) they name."""
    unknown = []
    for nodeid in document["cases"]:
        path, _, name = nodeid.partition("::")
        name = re.sub(r"\[.*\]$", "", name)
        source = root / path
        defined = source.exists() and (f"def {name}(" in source.read_text() if path.endswith(".py")
                                       else name in source.read_text())
        if not defined:
            unknown.append(nodeid)
    return unknown


def test_the_shipped_thresholds_load_and_name_cases_that_exist() -> None:
    document = json.loads(SHIPPED.read_text())
    thresholds = load_case_thresholds(SHIPPED)
    assert len(document["cases"]) >= 100
    some = next(iter(document["cases"]))
    assert thresholds.of(some).threshold_pct == document["cases"][some]["threshold"]
    assert all("measured" in entry and "at_defaults" in entry["measured"] for entry in document["cases"].values())
    assert unknown_cases(document, ROOT) == []
    # negative control: a case renamed since the file was measured is named
    renamed = {"cases": {"bench_cases/test_collectives.py::test_renamed_bandwidth[all_reduce-4KB]": {"threshold": 5},
                         "bench_cases/gone.py::test_x": {"threshold": 5}}}
    assert len(unknown_cases(renamed, ROOT)) == 2
