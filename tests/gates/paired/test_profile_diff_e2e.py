"""A confirmed regression says where its time went: a real git repository whose working tree makes one
operator of a case slower (``aten::cumsum`` on a 4x longer tensor); the failure names that operator."""

from __future__ import annotations

import json
from pathlib import Path

from tests.conftest import run_pytest, write_files
from tests.gates.paired.gitrepo import make_repo

WIDE = "1000"  # terminal columns: each verdict line whole, to be matched

LIB_REF = """
    import torch

    LENGTH = 200_000

    def step(a, long):
        b = a @ a
        c = torch.cumsum(long[:LENGTH], 0)
        return b, c
"""
CASES = """
    import pytest
    import torch
    import lib

    @pytest.mark.dmlbench(world_size=2, threshold=50)
    def test_slowed_cumsum(dist, dmlbench):
        a = torch.randn(120, 120)
        long = torch.randn(4_000_000)
        dmlbench(lib.step, a, long)

    @pytest.mark.dmlbench(world_size=2, threshold=50)
    def test_unchanged(dist, dmlbench):
        a = torch.randn(120, 120)
        dmlbench(torch.mm, a, a)
"""
TIMED = ("step_time_s", "cpu_time_s")


def test_a_confirmed_regression_names_the_operator_that_grew(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo", **{"lib.py": LIB_REF, "test_cases.py": CASES, "pytest.ini": "[pytest]\n"})
    write_files(repo, **{"lib.py": LIB_REF.replace("LENGTH = 200_000", "LENGTH = 4_000_000")})
    results, report = tmp_path / "results.json", tmp_path / "report"
    run = run_pytest(repo, "--dmlbench", "--dmlbench-against", "HEAD", "--dmlbench-json", str(results),
                     "--dmlbench-plots", str(report), timeout=900, COLUMNS=WIDE)
    assert run.returncode == 1, run.output
    run.lines.fnmatch_lines([
        "*step_time_s regressed against REF HEAD*",
        "Reproduce: *test_cases.py::test_slowed_cumsum",
        "Where the time grew (torch.profiler, one block each side, rank 0): the profiled block took * here "
        "against * in REF:",
        "  aten::cumsum: +* (* -> *, * % of the block; self CPU time)",
    ])
    cases = {c["nodeid"].split("::")[-1]: c for c in json.loads(results.read_text())["cases"]}
    profile = cases["test_slowed_cumsum"]["extra"]["paired"]["profile"]
    assert profile["grown"][0]["name"] == "aten::cumsum", profile["grown"]
    assert profile["a"]["seconds"]["aten::mm"] > 0 and profile["b"]["seconds"]["aten::cumsum"] > 0
    page = (report / "report.html").read_text()
    assert "Where the time grew" in page and "aten::cumsum: +" in page  # under the regression's message
    # negative control: an unchanged case is not profiled, and nothing else is named as grown
    assert "profile" not in cases["test_unchanged"]["extra"]["paired"]
    assert not any("Where the time grew" in v["message"] for v in cases["test_unchanged"]["verdicts"])
    # and only the regressed timed figures' messages carry the explanation: wall time's, and CPU time's where the
    # default CPU threshold judged this computing step and found it too
    verdicts = cases["test_slowed_cumsum"]["verdicts"]
    explained = [v["metric"] for v in verdicts if "Where the time grew" in v["message"]]
    regressed = [v["metric"] for v in verdicts if v["kind"] == "regression" and v["metric"] in TIMED]
    assert "step_time_s" in explained and explained == regressed, (explained, regressed)
