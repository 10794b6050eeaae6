"""A case's ``peak_rss_mb`` does not depend on which cases ran before it in the same rank processes: a real
world, a case that keeps 150 MB in its rank (as imports and caches do), and the measured case after it."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.conftest import Outcome, run_pytest, write_files

CASES = """
    import torch
    import pytest

    from pytest_dmlbench.measure.memory import peak_rss_bytes

    KEPT = []

    def _measured(dmlbench):
        def step():
            block = torch.ones(40_000_000, dtype=torch.uint8)
            del block

        dmlbench.pedantic(step, rounds=3, warmup=1)
        dmlbench.record("raw_high_water_mb", (peak_rss_bytes() or 0) / 1e6, unit="MB")

    @pytest.mark.dmlbench(world_size=2)
    def test_0_warm_up(dist, dmlbench):  # the code's first use in a rank (documented to count) is done here
        _measured(dmlbench)

    @pytest.mark.dmlbench(world_size=2)
    def test_1_measured_first(dist, dmlbench):
        _measured(dmlbench)

    @pytest.mark.dmlbench(world_size=2)
    def test_2_keeps_memory(dist):
        KEPT.append(torch.ones(150_000_000, dtype=torch.uint8))  # stays in the rank after the case

    @pytest.mark.dmlbench(world_size=2)
    def test_3_measured_after(dist, dmlbench):
        _measured(dmlbench)
"""


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


@dataclass
class Session:
    """Both files' cases run in one inner session (the rank processes of their worlds are their own: world
    size 2 for test_cases.py, 1 for test_idle.py)."""

    outcome: Outcome
    results: Path
    out_dir: Path


@pytest.fixture(scope="module")
def session(tmp_path_factory: pytest.TempPathFactory) -> Session:
    project = tmp_path_factory.mktemp("project")
    out_dir = tmp_path_factory.mktemp("out")
    write_files(project, **{"test_cases.py": CASES, "test_idle.py": IDLE_CASES})
    results = project / "results.json"
    outcome = run_pytest(project, "--dmlbench", "test_cases.py", "test_idle.py", "--dmlbench-json", str(results),
                         OUT_DIR=str(out_dir))
    return Session(outcome, results, out_dir)


def _figures(session: Session) -> dict[str, dict[str, float]]:
    assert session.outcome.returncode == 0, session.outcome.output
    return {
        case["nodeid"].rsplit("::", 1)[1]: {
            name: case["metrics"][name]["samples"][0] for name in ("peak_rss_mb", "raw_high_water_mb")
        }
        for case in json.loads(session.results.read_text())["cases"]
        if "_measured_" in case["nodeid"]
    }


def test_the_peak_of_a_case_is_the_same_after_a_case_that_kept_memory(session: Session) -> None:
    """One session, so that both readings share the rank processes and their start: the same measured case
    runs before and after a case that kept 150 MB, both after a warm-up case that did the code's one-time
    set-up in the rank (a rank's first use of code does count, as documented). Two sessions would compare
    rank start-up sizes too, which differed by 20 MB between sessions on a loaded machine."""
    figures = _figures(session)
    first, after = figures["test_1_measured_first"], figures["test_3_measured_after"]
    assert abs(after["peak_rss_mb"] - first["peak_rss_mb"]) < 20, (first, after)
    # negative control: the rank's raw high-water mark does hold the 150 MB the first case kept
    assert after["raw_high_water_mb"] - first["raw_high_water_mb"] > 130, (first, after)


def test_an_idle_rank_holds_no_freed_heap_of_its_last_case(session: Session) -> None:
    """While a world waits (the paired gate keeps the session's and two servers' worlds), its ranks hold
    none of the heap their last case freed; glibc would keep small freed chunks resident (the unit test
    of ``release_freed_memory`` shows it) until the next case trims them."""
    assert session.outcome.returncode == 0, session.outcome.output
    during, idle = (int(v) for v in (session.out_dir / "figures").read_text().split())
    assert during - idle > 200e6, (during / 1e6, idle / 1e6)
