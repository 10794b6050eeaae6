"""``studies/run_to_run_spread.py``: the spread of each case's medians over sessions; two real sessions daily."""

from __future__ import annotations

import pytest

from studies import run_to_run_spread
from tests.studies.running import run_study


def test_the_coefficient_of_variation_of_each_case_s_medians() -> None:
    rows = run_to_run_spread.spread_rows({"t.py::test_b[x]": [0.010, 0.012, 0.011], "t.py::test_a": [0.002] * 3,
                                          "t.py::test_once": [0.005]})
    assert rows == [["test_a", 3, "2.00", "2.00", "2.00", "0.0%"],
                    ["test_b[x]", 3, "11.00", "10.00", "12.00", "9.1%"],
                    ["test_once", 1, "5.00", "5.00", "5.00", "nan%"]]  # one run has no spread


@pytest.mark.slow
def test_two_sessions_of_one_case(capsys: pytest.CaptureFixture[str]) -> None:
    done = run_study(run_to_run_spread.main, capsys, "--repeats", "2", "--world-size", "2",
                     "bench_cases/test_collectives.py::test_collective_bandwidth[all_reduce-4KB]")
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.startswith("step_time_s:")
    [row] = [line for line in done.stdout.splitlines() if line.startswith("test_collective_bandwidth")]
    assert row.split()[1] == "2" and row.endswith("%")
