"""Run history in baseline files: carried forward by repeated saves, restarted by an accepted change."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pytest_dmlbench.errors import BaselineWarning
from pytest_dmlbench.gates.stored.between_runs import HISTORY_RUNS
from pytest_dmlbench.gates.stored.keeper import BaselineKeeper
from tests.configfactory import make_config
from tests.results.casefactory import MACHINE, make_case

NODE = "bench_cases/test_ddp.py::test_step[ddp]"


def keeper(root: Path, **options: object) -> BaselineKeeper:
    return BaselineKeeper(
        make_config(root, **options),
        fingerprint_for=lambda backend: {**MACHINE, "backend": backend},
    )


def stored_history(root: Path, metric: str = "step_time_s") -> list[float]:
    path = keeper(root).store_for(make_case(NODE)).path_for(NODE)
    return list(json.loads(path.read_text())["cases"][0]["metrics"][metric].get("history", []))


def test_repeated_saves_of_unchanged_code_build_the_history(tmp_path: Path) -> None:
    medians = []
    for seed in range(4):
        case = make_case(NODE, 0.010, seed=seed)
        medians.append(case.metrics["step_time_s"].stats.median)
        keeper(tmp_path, save=True).process(case)
    assert stored_history(tmp_path) == pytest.approx(medians[:-1])
    assert len(stored_history(tmp_path, "throughput_samples_per_s")) == 3
    current = make_case(NODE, 0.010, seed=10)
    keeper(tmp_path).process(current)
    step = next(v for v in current.verdicts if v.metric == "step_time_s")
    assert step.baseline_runs == 4 and step.between_runs_p is not None


def test_history_keeps_only_the_newest_runs(tmp_path: Path) -> None:
    for seed in range(HISTORY_RUNS + 3):
        keeper(tmp_path, save=True).process(make_case(NODE, 0.010, seed=seed))
    assert len(stored_history(tmp_path)) == HISTORY_RUNS - 1


def test_saving_an_intended_change_starts_the_history_afresh(tmp_path: Path) -> None:
    for seed in range(3):
        keeper(tmp_path, save=True).process(make_case(NODE, 0.010, seed=seed))
    assert len(stored_history(tmp_path)) == 2
    keeper(tmp_path, save=True).process(make_case(NODE, 0.020, seed=7))  # twice as slow, accepted
    assert stored_history(tmp_path) == []
    assert len(stored_history(tmp_path, "peak_rss_mb")) == 3  # unchanged metrics keep theirs


def test_before_the_noise_is_known_every_save_appends(tmp_path: Path) -> None:
    keeper(tmp_path, save=True).process(make_case(NODE, 0.010, seed=0))
    keeper(tmp_path, save=True).process(make_case(NODE, 0.013, seed=1))  # a noisy run, 30 % slower
    assert len(stored_history(tmp_path)) == 1


def test_replacing_an_unreadable_baseline_warns_that_its_history_is_lost(tmp_path: Path) -> None:
    path = keeper(tmp_path, save=True).store_for(make_case(NODE)).save_case(make_case(NODE))
    path.write_text('{"schema": 2, "machine": {}, "cases": [')
    case = make_case(NODE, seed=3)
    with pytest.warns(BaselineWarning, match="replaced an unreadable baseline; its run history starts over"):
        keeper(tmp_path, save=True).process(case)
    assert stored_history(tmp_path) == [] and "run history starts over" in case.extra["notes"][0]


def test_a_figure_too_short_to_test_keeps_building_its_history(tmp_path: Path) -> None:
    # 4 rounds: one block, so every save's comparison is inconclusive (untestable), never an accepted change
    for seed in range(4):
        keeper(tmp_path, save=True).process(make_case(NODE, 0.010, rounds=4, seed=seed))
    assert len(stored_history(tmp_path)) == 3  # (an accepted change still starts afresh: the test above)
