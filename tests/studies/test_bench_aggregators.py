"""``studies/bench_aggregators.py`` times every robust rule on tiny inputs and refuses inputs no rule can take."""

from __future__ import annotations

import pytest

from studies import bench_aggregators
from tests.studies.running import Ran, run_study


def timed_rules(done: Ran) -> list[str]:
    """The rule of every row of the final table (the rows below its header's dashed line)."""
    table = done.stdout.split("\n\n", 1)[1].splitlines()
    rule = next(i for i, line in enumerate(table) if line.startswith("---"))
    return [line.split()[2] for line in table[rule + 1:]]


def test_every_rule_is_timed_and_tabled(capsys: pytest.CaptureFixture[str]) -> None:
    done = run_study(bench_aggregators.main, capsys, "--n", "7", "--d", "64", "--repeats", "1", "--no-byzfl")
    assert done.returncode == 0, done.stderr
    assert timed_rules(done) == bench_aggregators.RULES
    assert "d = 64, float32, median of 1 calls" in done.stdout


def test_only_the_rules_asked_for(capsys: pytest.CaptureFixture[str]) -> None:
    done = run_study(bench_aggregators.main, capsys, "--n", "7", "--d", "8", "--repeats", "1", "--no-byzfl",
                     "--rules", "krum", "mean")
    assert timed_rules(done) == ["mean", "krum"]


def test_too_few_inputs_are_refused(capsys: pytest.CaptureFixture[str]) -> None:
    done = run_study(bench_aggregators.main, capsys, "--n", "2", "--d", "8")
    assert done.returncode == 2
    assert "need every n >= 3, d >= 1 and repeats >= 1" in done.stderr
