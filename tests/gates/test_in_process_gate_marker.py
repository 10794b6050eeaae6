"""``@pytest.mark.dmlbench_gate(threshold=, pair_budget=)`` sets the paired gate's threshold and pair budget
for a test that records in the pytest process (``dmlbench_metrics``), as the ``dmlbench`` marker does for a
rank case; bad values are usage errors. A per-case thresholds file (``--dmlbench-case-thresholds``) sets the
threshold of a case it lists, below the marker's. A real git repository, REF committed, a 2x slowdown in the working
tree (sleeps, so the verdicts do not depend on the machine's load)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import run_pytest, write_files
from tests.gates.paired.gitrepo import make_repo

CASES = """
    import time

    import pytest

    import lib

    def _samples():
        samples = []
        for _ in range(10):
            begin = time.perf_counter()
            time.sleep(0.002 * lib.SLOW)
            samples.append(time.perf_counter() - begin)
        return samples

    @pytest.mark.dmlbench_gate(threshold=300, pair_budget=30)
    def test_tolerant(dmlbench_metrics):
        dmlbench_metrics.record("dispatch_overhead_s", _samples())

    def test_default(dmlbench_metrics):
        dmlbench_metrics.record("dispatch_overhead_s", _samples())

    def test_listed(dmlbench_metrics):
        dmlbench_metrics.record("dispatch_overhead_s", _samples())
"""
# test_listed's own threshold; test_tolerant's marker beats the file's 5 %
CASE_THRESHOLDS = {"schema": 1, "cases": {"test_cases.py::test_listed": {"threshold": 250, "cpu_threshold": 4},
                                          "test_cases.py::test_tolerant": {"threshold": 5}}}


def test_the_marker_s_threshold_applies_to_in_process_figures(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo",
                     **{"lib.py": "SLOW = 1.0\n", "test_cases.py": CASES, "pytest.ini": "[pytest]\n"})
    write_files(repo, **{"lib.py": "SLOW = 2.0\n"})
    (tmp_path / "thresholds.json").write_text(json.dumps(CASE_THRESHOLDS))
    results = tmp_path / "results.json"
    # the file in the "=" form: pytest counts an existing path among its arguments when it picks the rootdir
    run = run_pytest(repo, "--dmlbench", "--dmlbench-against", "HEAD", "--dmlbench-json", str(results),
                     f"--dmlbench-case-thresholds={tmp_path / 'thresholds.json'}", timeout=600)
    assert run.returncode == 1, run.output
    cases = {c["nodeid"].split("::")[-1]: c for c in json.loads(results.read_text())["cases"]}
    tolerant = cases["test_tolerant"]
    assert [v["kind"] for v in tolerant["verdicts"]] == ["unchanged"], tolerant  # x2 is within 300 %
    assert "threshold 300 %" in tolerant["verdicts"][0]["message"] and tolerant["extra"]["paired"]["budget_s"] == 30
    # the raw evidence is kept for replay: per stage, who ran first and A's and B's block medians
    paired = tolerant["extra"]["paired"]
    stages = paired["block_medians"]
    assert [len(stage["a_first"]) for stage in stages] == paired["pairs_per_stage"]
    assert len(stages[0]["a"]["dispatch_overhead_s"]) == len(stages[0]["b"]["dispatch_overhead_s"]) == len(
        stages[0]["a_first"])
    # and the canary read beside every block of either side (studies/canary_noise.py re-estimates with it)
    canary = stages[0]["canary"]
    assert len(canary["a"]) == len(canary["b"]) == len(stages[0]["a_first"])
    assert all(0.0 < reading < 1.0 for reading in canary["a"] + canary["b"]), canary
    # negative control: the same slowdown under the run's 10 % threshold fails
    assert [v["kind"] for v in cases["test_default"]["verdicts"]] == ["regression"], cases["test_default"]
    assert cases["test_default"].get("threshold_pct") is None and "cpu_threshold_pct" not in cases["test_default"]
    # the file's threshold for the case it lists, recorded with the case, CPU time's too
    listed = cases["test_listed"]
    assert [v["kind"] for v in listed["verdicts"]] == ["unchanged"], listed  # x2 is within 250 %
    assert "threshold 250 %" in listed["verdicts"][0]["message"]
    assert (listed["threshold_pct"], listed["cpu_threshold_pct"]) == (250, 4)
    assert tolerant["threshold_pct"] == 300  # the marker's, not the file's 5


@pytest.mark.parametrize(("arguments", "problem"), [
    ("threshold=-5", "threshold=*"), ("pair_budget=0", "pair_budget=*"), ("rounds=3", "*unknown dmlbench_gate*rounds*"),
])
def test_a_bad_marker_value_is_a_usage_error(tmp_path: Path, arguments: str, problem: str) -> None:
    write_files(tmp_path, **{"test_x.py": f"""
        import pytest

        @pytest.mark.dmlbench_gate({arguments})
        def test_x(dmlbench_metrics):
            dmlbench_metrics.record("dispatch_overhead_s", [1.0, 1.0])
    """})
    run = run_pytest(tmp_path, "--dmlbench")
    assert run.returncode != 0, run.output
    run.lines.fnmatch_lines([f"*{problem}*"])
