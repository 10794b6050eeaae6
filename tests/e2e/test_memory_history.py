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


IDLE_CASES = """
    import os
    import pathlib

    import pytest

    from pytest_dmlbench.measure.memory import current_rss_bytes

    OUT = pathlib.Path(os.environ["OUT_DIR"])

    @pytest.mark.dmlbench(world_size=1)
    def test_a_heavy_case(dist):
        held = [bytearray(1000) for _ in range(300_000)]  # about 300 MB in small heap chunks, freed at return
        (OUT / "rank").write_text(f"{os.getpid()} {current_rss_bytes()}")
        del held

    def test_b_the_idle_rank(tmp_path):
        pid, during = (int(v) for v in (OUT / "rank").read_text().split())
        status = pathlib.Path(f"/proc/{pid}/status").read_text()
        idle = next(int(line.split()[1]) * 1024 for line in status.splitlines() if line.startswith("VmRSS:"))
        (OUT / "figures").write_text(f"{during} {idle}")
"""


def test_an_idle_rank_holds_no_freed_heap_of_its_last_case(tmp_path: Path) -> None:
    """While a world waits (the paired gate keeps the session's and two servers' worlds), its ranks hold
    none of the heap their last case freed; glibc would keep small freed chunks resident (the unit test
    of ``release_freed_memory`` shows it) until the next case trims them."""
    project = tmp_path / "project"
    write_files(project, **{"test_idle.py": IDLE_CASES})
    outcome = run_pytest(project, "--dmlbench", "-p", "no:randomly", OUT_DIR=str(tmp_path))
    assert outcome.returncode == 0, outcome.output
    during, idle = (int(v) for v in (tmp_path / "figures").read_text().split())
    assert during - idle > 200e6, (during / 1e6, idle / 1e6)
