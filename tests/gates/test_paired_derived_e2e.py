"""Under ``--dmlbench-against``, a scaling case's ``speedup`` and ``scaling_efficiency`` are judged on block
pairs like its throughput: each block's throughput over its own side's one-rank throughput (a real git
repository, REF committed, the change in the working tree), two cases in one run.

The figures are fixed numbers recorded by the body, so the verdicts cannot depend on the machine's load.
"""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from tests.conftest import Outcome, SharedSessions, run_pytest, write_files
from tests.gates.paired.gitrepo import make_repo

# Two scaling cases judged in one paired run, each reading its rates from its own names in lib: test_halved's
# every size halves (its speedup stays 1.8), test_lost's many-rank rate drops to its one-rank rate.
REF_RATES = {"ONE_RANK_RATE": 1000.0, "MANY_RANK_RATE": 1800.0}
CHANGES = {"halved": {"ONE_RANK_RATE": 500.0, "MANY_RANK_RATE": 900.0}, "lost": {"MANY_RANK_RATE": 1000.0}}
CASE = """
    @pytest.mark.dmlbench(scaling=True, threshold=10)
    def test_{name}(dist, dmlbench):
        dmlbench(time.sleep, 0.002)
        rate = lib.{name}_ONE_RANK_RATE if dist.world_size == 1 else lib.{name}_MANY_RANK_RATE
        dmlbench.record("throughput_samples_per_s", [rate] * 5)
"""
CASES = """
    import time

    import pytest

    import lib
""" + "".join(CASE.format(name=name) for name in CHANGES)


def lib(changed: bool) -> str:
    return "".join(f"    {name}_{rate} = {value}\n" for name, changes in CHANGES.items()
                   for rate, value in {**REF_RATES, **(changes if changed else {})}.items())


Judged = tuple[Outcome, dict[str, dict[str, dict[str, object]]], set[str]]


def _judged(folder: Path) -> Judged:
    repo = make_repo(folder / "repo", **{"lib.py": lib(False), "test_cases.py": CASES, "pytest.ini": "[pytest]\n"})
    write_files(repo, **{"lib.py": lib(True)})
    results, junit = folder / "results.json", folder / "junit.xml"
    run = run_pytest(repo, "--dmlbench", "--world-size", "2", "--dmlbench-against", "HEAD",
                     "--dmlbench-json", str(results), "--junitxml", str(junit), timeout=600)
    cases = json.loads(results.read_text())["cases"]
    failed = {case.get("name", "") for case in ET.parse(junit).iter("testcase") if case.find("failure") is not None}
    return run, {c["nodeid"].split("::")[-1]: {v["metric"]: v for v in c["verdicts"]} for c in cases}, failed


@pytest.fixture
def judged(shared_sessions: SharedSessions) -> Judged:
    return shared_sessions.get("derived-e2e", _judged)[0]


def test_speedup_is_judged_on_block_pairs_and_unchanged_when_every_size_slows_alike(judged: Judged) -> None:
    run, found, failed = judged
    assert run.returncode == 1 and "test_halved[ws2]" in failed, run.output
    assert found["test_halved[ws2]"]["throughput_samples_per_s"]["kind"] == "regression"
    for name in ("speedup", "scaling_efficiency"):
        verdict = found["test_halved[ws2]"][name]
        assert verdict["kind"] == "unchanged", verdict  # both sizes halved: the speedup is still 1.8
        assert "block pairs" in str(verdict["message"]), verdict


def test_negative_control_a_lost_speedup_is_a_regression(judged: Judged) -> None:
    run, found, failed = judged
    assert run.returncode == 1 and "test_lost[ws2]" in failed, run.output
    assert found["test_lost[ws1]"]["throughput_samples_per_s"]["kind"] == "unchanged"
    speedup = found["test_lost[ws2]"]["speedup"]
    assert speedup["kind"] == "regression", speedup  # 1.8x -> 1.0x
    efficiency = found["test_lost[ws2]"]["scaling_efficiency"]
    assert efficiency["kind"] == "regression" and "pp" in str(efficiency["message"]), efficiency  # 90 % -> 50 %
