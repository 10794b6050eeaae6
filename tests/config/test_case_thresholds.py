"""The per-case thresholds file (``--dmlbench-case-thresholds``): read as written, every bad file refused with a
message naming the file, the case and the fix. That a listed threshold reaches the verdict, below the
marker's, is shown end to end in ``tests/gates/test_in_process_gate_marker.py``; a file that lists none of the
run's cases (written from another rootdir) is named in a warning."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pytest_dmlbench.config.case_thresholds import (
    NO_CASE_THRESHOLDS,
    CaseThreshold,
    load_case_thresholds,
    parse_case_thresholds,
)
from pytest_dmlbench.errors import ConfigError
from tests.conftest import run_pytest, write_files


def _file(tmp_path: Path, document: object) -> Path:
    path = tmp_path / "thresholds.json"
    path.write_text(json.dumps(document))
    return path


def test_listed_cases_get_their_thresholds_and_others_the_run_s(tmp_path: Path) -> None:
    path = _file(tmp_path, {"schema": 1, "cases": {
        "t.py::a": {"threshold": 7.5, "cpu_threshold": "2.5%", "measured": {"noise_pct": 3.1}},
        "t.py::b": {"cpu_threshold": 4}, "t.py::c": {"cpu_threshold": "off"}}})
    thresholds = load_case_thresholds(path)
    assert thresholds.of("t.py::a") == CaseThreshold(7.5, 2.5)
    assert thresholds.of("t.py::b") == CaseThreshold(None, 4.0)
    assert thresholds.of("t.py::c") == CaseThreshold(None, "off")
    assert thresholds.of("t.py::unlisted") == CaseThreshold(None, None)
    assert thresholds.source == str(path)


@pytest.mark.parametrize(("document", "problem"), [
    ([1, 2], "expected a JSON object"),
    ({"schema": 1}, "expected a JSON object"),
    ({"schema": 2, "cases": {}}, "schema 2 is not 1; write the file again"),
    ({"schema": 1, "cases": {"t.py::a": 5}}, "t.py::a: expected an object"),
    ({"schema": 1, "cases": {"t.py::a": {"treshold": 5}}}, "t.py::a: unknown key(s) treshold; accepted: threshold"),
    ({"schema": 1, "cases": {"t.py::a": {"threshold": -5}}}, "t.py::a: threshold"),
    ({"schema": 1, "cases": {"t.py::a": {"cpu_threshold": "fast"}}}, "t.py::a: cpu_threshold"),
])
def test_a_bad_file_is_refused_naming_what_is_wrong(tmp_path: Path, document: object, problem: str) -> None:
    with pytest.raises(ConfigError, match="--dmlbench-case-thresholds") as refused:
        load_case_thresholds(_file(tmp_path, document))
    assert problem in str(refused.value)


def test_an_unreadable_or_corrupt_file_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot read it"):
        load_case_thresholds(tmp_path / "missing.json")
    corrupt = tmp_path / "corrupt.json"
    corrupt.write_text('{"schema": 1, "cases": {')
    with pytest.raises(ConfigError, match="not JSON"):
        load_case_thresholds(corrupt)


def test_a_bad_file_stops_the_run_as_a_usage_error(tmp_path: Path) -> None:
    write_files(tmp_path, **{"test_x.py": "def test_x():\n    pass\n",
                             "thresholds.json": '{"schema": 1, "cases": {"test_x.py::test_x": {"threshold": -1}}}'})
    run = run_pytest(tmp_path, "--dmlbench", "--dmlbench-case-thresholds", "thresholds.json")
    assert run.returncode == 4, run.output  # pytest's usage error, before any case runs
    run.lines.fnmatch_lines(["*--dmlbench-case-thresholds thresholds.json: test_x.py::test_x: threshold*"])


def test_a_file_that_lists_none_of_the_run_s_cases_is_named() -> None:
    thresholds = parse_case_thresholds({"schema": 1, "cases": {"sub/test_x.py::test_x": {"threshold": 5}}}, "t.json")
    warning = thresholds.matches_none_of(["test_x.py::test_x", "test_x.py::test_y"], "/repo/sub")
    assert warning is not None
    assert "none of this run's 2 case(s) is among the 1 it lists" in warning
    assert "'sub/test_x.py::test_x'" in warning and "'test_x.py::test_x'" in warning and "(/repo/sub)" in warning
    # negative controls: one listed case among the run's, no file, no cases
    assert thresholds.matches_none_of(["test_x.py::test_y", "sub/test_x.py::test_x"], "/repo") is None
    assert NO_CASE_THRESHOLDS.matches_none_of(["test_x.py::test_x"], "/repo") is None
    assert thresholds.matches_none_of([], "/repo") is None


def test_the_run_warns_when_the_file_matches_none_of_its_cases(tmp_path: Path) -> None:
    write_files(tmp_path, **{"test_x.py": "def test_x():\n    pass\n",
                             "thresholds.json": '{"schema": 1, "cases": {"sub/test_x.py::test_x": {"threshold": 5}}}'})
    run = run_pytest(tmp_path, "--dmlbench", "--dmlbench-case-thresholds=thresholds.json")
    assert run.returncode == 0, run.output
    run.lines.fnmatch_lines(["*CaseThresholdsWarning: --dmlbench-case-thresholds *thresholds.json: none of this "
                             "run's 1 case(s) is among the 1 it lists*", "*1 passed, 1 warning*"])
