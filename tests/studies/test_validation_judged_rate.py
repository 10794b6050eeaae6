"""``studies/validation_judged_rate.py``: how it reads each validation's outcome from pytest's JUnit file; the
repeated real runs daily."""

from __future__ import annotations

from pathlib import Path

import pytest

from studies import validation_judged_rate
from tests.studies.running import run_study

JUNIT = """<?xml version="1.0" encoding="utf-8"?>
<testsuites><testsuite name="pytest">
  <testcase classname="v" name="test_passed" time="1.0"/>
  <testcase classname="v" name="test_failed" time="1.0"><failure message="off by 5 pp"/></testcase>
  <testcase classname="v" name="test_errored" time="1.0"><error message="setup broke"/></testcase>
  <testcase classname="v" name="test_not_judged" time="1.0">
    <skipped message="not judged: the machine was too noisy"/></testcase>
  <testcase classname="v" name="test_skipped" time="1.0"><skipped message="needs 4 cores"/></testcase>
</testsuite></testsuites>
"""


def test_each_outcome_is_read_from_the_junit_file(tmp_path: Path) -> None:
    junit = tmp_path / "run.xml"
    junit.write_text(JUNIT)
    assert validation_judged_rate.outcomes(junit) == {
        "test_passed": "passed", "test_failed": "failed", "test_errored": "failed",
        "test_not_judged": "not judged", "test_skipped": "skipped: needs 4 cores"}


@pytest.mark.slow
def test_one_run_judges_both_validations(capsys: pytest.CaptureFixture[str]) -> None:
    done = run_study(validation_judged_rate.main, capsys, "--runs", "1")
    assert done.returncode == 0, done.stderr
    verdicts = [line for line in done.stdout.splitlines() if ": judged " in line]
    assert len(verdicts) == 2 and all("/1 (" in line for line in verdicts), done.stdout
