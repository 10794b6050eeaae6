"""A case's ``peak_rss_mb`` does not depend on which cases ran before it in the same rank processes: a real
world, a case that keeps 150 MB in its rank (as imports and caches do), and the measured case after it."""

from __future__ import annotations

import json
from pathlib import Path

from tests.conftest import run_pytest, write_files

CASES = """
    import torch
    import pytest

    KEPT = []

    @pytest.mark.dmlbench(world_size=2)
    def test_a_keeps_memory(dist):
        KEPT.append(torch.ones(150_000_000, dtype=torch.uint8))  # stays in the rank after the case

    @pytest.mark.dmlbench(world_size=2)
    def test_b_measured(dist, dmlbench):
        from pytest_dmlbench.measure.memory import peak_rss_bytes

        def step():
            block = torch.ones(40_000_000, dtype=torch.uint8)
            del block

        dmlbench.pedantic(step, rounds=3, warmup=1)
        dmlbench.record("raw_high_water_mb", (peak_rss_bytes() or 0) / 1e6, unit="MB")
"""


def _figures(folder: Path, *selection: str) -> dict[str, float]:
    out = folder / f"results-{len(selection)}.json"
    outcome = run_pytest(folder, "--dmlbench", *selection, "--dmlbench-json", str(out))
    assert outcome.returncode == 0, outcome.output
    case = next(c for c in json.loads(out.read_text())["cases"] if c["nodeid"].endswith("test_b_measured"))
    return {name: case["metrics"][name]["samples"][0] for name in ("peak_rss_mb", "raw_high_water_mb")}


def test_the_peak_of_a_case_is_the_same_after_a_case_that_kept_memory(tmp_path: Path) -> None:
    write_files(tmp_path, **{"test_cases.py": CASES})
    alone = _figures(tmp_path, "test_cases.py::test_b_measured")
    after = _figures(tmp_path, "test_cases.py::test_a_keeps_memory", "test_cases.py::test_b_measured")
    assert abs(after["peak_rss_mb"] - alone["peak_rss_mb"]) < 20, (alone, after)
    # negative control: the rank's raw high-water mark does hold the 150 MB the first case kept
    assert after["raw_high_water_mb"] - alone["raw_high_water_mb"] > 130, (alone, after)
