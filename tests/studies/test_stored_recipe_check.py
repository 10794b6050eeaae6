"""``studies/stored_recipe_check.py``: how it counts a run's items and verdicts; the recipe itself (real sessions:
saves, unchanged runs, slowed runs) daily."""

from __future__ import annotations

from collections import Counter

import pytest

from studies import stored_recipe_check
from tests.studies.running import run_study


def test_failed_items_and_verdict_kinds_are_counted() -> None:
    document: dict[str, object] = {"cases": [
        {"outcome": "failed", "verdicts": [{"metric": "step_time_s", "kind": "regression"},
                                           {"metric": "peak_rss_mb", "kind": "unchanged"}]},
        {"outcome": "passed", "verdicts": [{"metric": "step_time_s", "kind": "inconclusive"},
                                           {"metric": "throughput_samples_per_s", "kind": "inconclusive"}]},
    ]}
    failed, kinds, step = stored_recipe_check.judged(document)
    assert failed == 1
    assert kinds == Counter({"inconclusive": 2, "regression": 1, "unchanged": 1})
    assert step == Counter({"regression": 1, "inconclusive": 1})


@pytest.mark.slow
def test_the_recipe_with_the_fewest_sessions(capsys: pytest.CaptureFixture[str]) -> None:
    done = run_study(stored_recipe_check.main, capsys, "--saves", "3", "--compares", "1", "--slowed", "1")
    assert done.returncode == 0, done.stderr
    assert "recipe: 3 saves; unchanged: " in done.stdout and "of 10 items failed" in done.stdout
    assert "30 % slowdown: " in done.stdout and " of 10 caught" in done.stdout
