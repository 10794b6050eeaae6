"""Under ``--dmlbench-against``, a scaling case's ``speedup`` and ``scaling_efficiency`` are judged on block
pairs like its throughput: each block's throughput over its own side's one-rank throughput (a real git
repository, REF committed, the change in the working tree).

The figures are fixed numbers recorded by the body, so the verdicts cannot depend on the machine's load.
"""

from __future__ import annotations

import json
from pathlib import Path

from tests.conftest import run_pytest, write_files
from tests.gates.paired.gitrepo import make_repo

REF_RATES = {"ONE_RANK_RATE": 1000.0, "MANY_RANK_RATE": 1800.0}
LIB_REF = "".join(f"    {name} = {value}\n" for name, value in REF_RATES.items())
CASES = """
    import time

    import pytest

    import lib

    @pytest.mark.dmlbench(scaling=True, threshold=10)
    def test_scaling(dist, dmlbench):
        dmlbench(time.sleep, 0.002)
        rate = lib.ONE_RANK_RATE if dist.world_size == 1 else lib.MANY_RANK_RATE
        dmlbench.record("throughput_samples_per_s", [rate] * 5)
"""


def judged(tmp_path: Path, **changes: float) -> tuple[object, dict[str, dict[str, dict[str, object]]]]:
    repo = make_repo(tmp_path / "repo", **{"lib.py": LIB_REF, "test_cases.py": CASES, "pytest.ini": "[pytest]\n"})
    lib = "".join(f"    {name} = {value}\n" for name, value in {**REF_RATES, **changes}.items())
    write_files(repo, **{"lib.py": lib})
    results = tmp_path / "results.json"
    run = run_pytest(repo, "--dmlbench", "--world-size", "2", "--dmlbench-against", "HEAD",
                     "--dmlbench-json", str(results), timeout=600)
    cases = json.loads(results.read_text())["cases"]
    return run, {c["nodeid"].split("::")[-1]: {v["metric"]: v for v in c["verdicts"]} for c in cases}


def test_speedup_is_judged_on_block_pairs_and_unchanged_when_every_size_slows_alike(tmp_path: Path) -> None:
    run, found = judged(tmp_path, ONE_RANK_RATE=500.0, MANY_RANK_RATE=900.0)
    assert run.returncode == 1, run.output  # type: ignore[attr-defined]
    assert found["test_scaling[ws2]"]["throughput_samples_per_s"]["kind"] == "regression"
    for name in ("speedup", "scaling_efficiency"):
        verdict = found["test_scaling[ws2]"][name]
        assert verdict["kind"] == "unchanged", verdict  # both sizes halved: the speedup is still 1.8
        assert "block pairs" in str(verdict["message"]), verdict


def test_negative_control_a_lost_speedup_is_a_regression(tmp_path: Path) -> None:
    run, found = judged(tmp_path, MANY_RANK_RATE=1000.0)
    assert run.returncode == 1, run.output  # type: ignore[attr-defined]
    assert found["test_scaling[ws1]"]["throughput_samples_per_s"]["kind"] == "unchanged"
    speedup = found["test_scaling[ws2]"]["speedup"]
    assert speedup["kind"] == "regression", speedup  # 1.8x -> 1.0x
    efficiency = found["test_scaling[ws2]"]["scaling_efficiency"]
    assert efficiency["kind"] == "regression" and "pp" in str(efficiency["message"]), efficiency  # 90 % -> 50 %
