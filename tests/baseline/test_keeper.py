"""The per-case baseline policy the plugin calls: save, compare, new, no-compare, unusable files."""

from __future__ import annotations

from pathlib import Path

import pytest
from casefactory import MACHINE, make_case

from pytest_dmlbench.baseline.compare import failure_report
from pytest_dmlbench.baseline.keeper import BaselineKeeper, BaselineOptions
from pytest_dmlbench.errors import BaselineError, BaselineWarning

NODE = "bench_cases/test_ddp.py::test_step[ddp]"


def fingerprint(backend: str) -> dict[str, object]:
    return {**MACHINE, "backend": backend}


def keeper(root: Path, **options: object) -> BaselineKeeper:
    return BaselineKeeper(BaselineOptions(root=root, **options), fingerprint_for=fingerprint)  # type: ignore[arg-type]


def test_save_then_compare_unchanged_then_slower(tmp_path: Path) -> None:
    assert keeper(tmp_path, save=True).process(make_case(NODE, 0.010, seed=1)) == []
    unchanged = make_case(NODE, 0.010, seed=2)
    assert keeper(tmp_path).process(unchanged) == []
    assert {v.kind for v in unchanged.verdicts} == {"unchanged"}
    slower = make_case(NODE, 0.013, seed=3)
    failing = keeper(tmp_path).process(slower)
    assert [v.metric for v in failing] == ["step_time_s", "throughput_samples_per_s"]
    report = failure_report(failing)
    assert "step_time_s regressed" in report and f"pytest --dmlbench '{NODE}' --dmlbench-save" in report


def test_without_any_baseline_nothing_is_compared_and_a_new_case_is_new(tmp_path: Path) -> None:
    case = make_case(NODE)
    assert keeper(tmp_path).process(case) == [] and case.verdicts == []
    keeper(tmp_path, save=True).process(make_case("bench_cases/test_other.py::test_x"))
    assert keeper(tmp_path).process(case) == []
    assert {v.kind for v in case.verdicts} == {"new"}


def test_no_compare_and_backend_keys(tmp_path: Path) -> None:
    keeper(tmp_path, save=True).process(make_case(NODE, 0.010, seed=1))
    slower = make_case(NODE, 0.013, seed=3)
    assert keeper(tmp_path, compare=False).process(slower) == [] and slower.verdicts == []
    slower.backend = "nccl"  # another machine class: no baseline there
    assert keeper(tmp_path).process(slower) == [] and slower.verdicts == []


def test_fail_on_improvement(tmp_path: Path) -> None:
    keeper(tmp_path, save=True).process(make_case(NODE, 0.010, seed=1))
    faster = make_case(NODE, 0.007, seed=2)
    assert keeper(tmp_path).process(faster) == []
    assert {v.kind for v in keeper(tmp_path, fail_on_improvement=True).process(faster)} == {"improvement"}


def test_unusable_file_fails_comparison_until_an_explicit_save(tmp_path: Path) -> None:
    path = keeper(tmp_path, save=True).store_for("gloo").save_case(make_case(NODE))
    path.write_text("{")
    with pytest.raises(BaselineError, match="is not valid JSON"):
        keeper(tmp_path).process(make_case(NODE))
    assert path.read_text() == "{"
    with pytest.warns(BaselineWarning, match="replaced an unreadable baseline"):
        keeper(tmp_path, save=True).process(make_case(NODE, seed=5))
    assert keeper(tmp_path).process(make_case(NODE, seed=6)) == []
