"""``studies/paired_kinds_quality.py``: with no sessions it builds its repository and prints an empty tally; one
real A/A and one slowed session daily."""

from __future__ import annotations

import pytest

from studies import paired_kinds_quality as study
from tests.studies.running import run_study


def test_no_sessions_print_an_empty_row_per_kind(capsys: pytest.CaptureFixture[str]) -> None:
    done = run_study(study.main, capsys, "--sessions", "0")
    assert done.returncode == 0, done.stderr
    rows = [line for line in done.stdout.splitlines() if line.startswith("test_")]
    assert [row.split()[0] for row in rows] == list(study.KINDS)
    assert all(row.split()[1] == f"({study.KINDS[row.split()[0]]})" and row.endswith("{}") for row in rows)
    assert "0 sessions each way" in done.stdout


@pytest.mark.slow
def test_one_session_each_way(capsys: pytest.CaptureFixture[str]) -> None:
    done = run_study(study.main, capsys, "--sessions", "1")
    assert done.returncode == 0, done.stderr
    rows = {line.split()[0]: line for line in done.stdout.splitlines() if line.startswith("test_")}
    assert set(rows) == set(study.KINDS)
    assert "'missing'" not in "".join(rows.values())  # every case recorded its figure's verdict
