"""Terminal table, markdown summary and results files."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from casefactory import make_case, make_run

from pytest_dmlbench.baseline.compare import CompareSettings, compare_run
from pytest_dmlbench.errors import BaselineError
from pytest_dmlbench.report import (
    append_step_summary,
    markdown_summary,
    oversubscribed,
    read_results,
    terminal_table,
    write_results,
)

LONG_ID = "bench_cases/test_strategies.py::test_ddp_step[bucketed-resnet18-bs64-ws4-with-a-long-parameter-id]"


def compared_run() -> tuple[str, object]:
    baseline = make_run(
        [make_case(LONG_ID, 0.010, seed=1), make_case("bench_cases/test_x.py::test_y", 0.02, 2)]
    )
    current = make_run(
        [
            make_case(LONG_ID, 0.013, seed=3),
            make_case("bench_cases/test_x.py::test_y", 0.02, 4),
            make_case("bench_cases/test_x.py::test_new", 0.02, 5, world_size=1),
        ]
    )
    return LONG_ID, compare_run(baseline, current, CompareSettings(min_runs=1))  # the views, not the rule


def test_plain_table_is_one_line_per_case_with_units_and_no_verdict_columns() -> None:
    table = terminal_table(
        make_run([make_case("bench_cases/test_x.py::test_y", 0.010, seed=1, world_size=1)])
    )
    lines = table.splitlines()
    assert lines[0].startswith("units: bytes in SI units (1 kB = 1000 B, 1 MB = 10^6 B")
    assert lines[1].split() == ["case", "ws", "headline", "metric", "median"]
    row = lines[3]
    assert row.startswith("bench_cases/test_x.py::test_y")
    assert row.split()[1:4] == ["1", "throughput_samples_per_s", row.split()[3]]
    assert row.rstrip().endswith("samples/s")
    assert "step_time_s" not in table and "peak_rss_mb" not in table  # only the headline metric
    assert "verdict" not in table and "oversubscribed" not in table


def test_verbose_table_gives_every_metric_with_a_unit_on_every_figure() -> None:
    table = terminal_table(
        make_run([make_case("bench_cases/test_x.py::test_y", 0.010, seed=1, world_size=1)]), verbose=True
    )
    lines = table.splitlines()
    assert lines[1].split() == ["case", "/", "metric", "ws", "median", "IQR", "n"]
    step_row = next(line for line in lines if line.startswith("- step_time_s"))
    median, iqr = step_row.split()[2:4], step_row.split()[4:6]
    assert median[1] == "ms" and iqr[1] == "ms" and step_row.rstrip().endswith("20")
    ratio_row = next(line for line in lines if line.startswith("- compute_comm_ratio"))
    assert ratio_row.split()[2:4] == ["3", "ratio"]
    memory_row = next(line for line in lines if line.startswith("- peak_rss_mb"))
    assert memory_row.split()[2:4][1] == "MB" and memory_row.split()[-1] == "20"


def test_compared_table_fits_120_columns_shows_whole_node_ids_and_verdicts() -> None:
    _, results = compared_run()
    table = terminal_table(results)  # type: ignore[arg-type]
    assert max(len(line) for line in table.splitlines()) <= 120
    header = table.splitlines()[1].split()
    assert header[-2:] == ["change", "verdict"]
    first_column = [line[:34].rstrip() for line in table.splitlines()[3:]]
    assert LONG_ID in "".join(first_column)  # wrapped over lines, never elided
    assert "..." not in table
    # under the table, every notable verdict: the case (worst kind first), then each metric and its change
    lines = table.splitlines()
    notes = lines[lines.index(next(line for line in lines if line.startswith("REGR"))):]
    assert notes[0].startswith("REGRESSION    bench_cases/test_strategies.py::")
    assert any(line.strip().startswith("REGRESSION step_time_s: +") and "slower" in line for line in notes)
    assert "inconclusive  bench_cases/test_x.py::test_y" in table  # too few rounds: no test, and it says so
    assert "verdicts: 2 regression, 2 inconclusive, 3 new, 2 unchanged" in table


def test_compared_verbose_table_has_baseline_change_and_p_values() -> None:
    _, results = compared_run()
    table = terminal_table(results, verbose=True)  # type: ignore[arg-type]
    assert table.splitlines()[1].split()[-3:] == ["baseline", "change", "verdict"]
    step_row = next(line for line in table.splitlines() if line.startswith("- step_time_s")
                    and "REGRESSION" in line)
    assert "REGRESSION p=" in step_row and " ms " in step_row and "+" in step_row


def test_oversubscription_flag_follows_ranks_times_workers() -> None:
    run = make_run([make_case("t.py::a", world_size=1), make_case("t.py::b", world_size=2)], xdist_workers=2)
    flags = [oversubscribed(case, run) for case in run.cases]
    assert flags == [False, True]  # 1 x 2 = 2 cores is fine, 2 x 2 > 2 is not
    rows = [line.split() for line in terminal_table(run).splitlines() if line.startswith("t.py::")]  # short ids
    assert [row[:3] for row in rows] == [["t.py::a", "1", "throughput_samples_per_s"],
                                         ["t.py::b", "2", "!"]]
    assert "! oversubscribed: ranks x xdist workers (2 worker(s)) > 2 cores" in terminal_table(run)


def test_cases_come_in_natural_order_of_sizes() -> None:
    ids = [f"c.py::test_bw[all_reduce-{size}]" for size in ("16MB", "1MB", "4KB", "64MB", "4MB")]
    table = terminal_table(make_run([make_case(nodeid, world_size=1) for nodeid in ids]))
    shown = [line.split()[0] for line in table.splitlines() if line.startswith("c.py::")]
    assert shown == [f"c.py::test_bw[all_reduce-{s}]" for s in ("4KB", "1MB", "4MB", "16MB", "64MB")]
    assert sorted(ids) != [f"c.py::test_bw[all_reduce-{s}]" for s in ("4KB", "1MB", "4MB", "16MB", "64MB")]


def test_markdown_summary_has_the_table_and_each_regression_message() -> None:
    nodeid, results = compared_run()
    text = markdown_summary(results)  # type: ignore[arg-type]
    assert text.startswith("## pytest-dmlbench results\n")
    assert "| case " in text and "|---" in text and "<details>" in text and "| case / metric" in text
    assert nodeid in text  # whole, not wrapped or elided
    assert "**Verdicts:** 2 regression, 2 inconclusive, 3 new, 2 unchanged" in text
    assert f"### regression: `{nodeid}` step_time_s" in text
    assert "--dmlbench-save" in text


def test_step_summary_is_appended_to_the_file_named_by_the_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _, results = compared_run()
    summary = tmp_path / "summary.md"
    summary.write_text("# earlier step\n")
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    assert append_step_summary(results) == summary  # type: ignore[arg-type]
    text = summary.read_text()
    assert text.startswith("# earlier step\n## pytest-dmlbench results")
    monkeypatch.delenv("GITHUB_STEP_SUMMARY")
    assert append_step_summary(results) is None  # type: ignore[arg-type]


def test_results_file_round_trip_is_strict_json(tmp_path: Path) -> None:
    _, results = compared_run()
    results.cases[0].metrics["step_time_s"].samples.append(float("nan"))  # type: ignore[attr-defined]
    path = tmp_path / "out" / "results.json"
    write_results(path, results)  # type: ignore[arg-type]
    document = json.loads(path.read_text(), parse_constant=lambda c: pytest.fail(f"non-strict JSON: {c}"))
    assert document["cases"][0]["verdicts"][0]["kind"] == "regression"
    back = read_results(path)
    assert back.to_dict() == results.to_dict()  # type: ignore[attr-defined]


def test_unreadable_results_file_names_the_file_and_the_fix(tmp_path: Path) -> None:
    path = tmp_path / "results.json"
    path.write_text('{"schema": 2, "machine": {}, "cases": [')
    with pytest.raises(BaselineError, match=r"results.json: is not valid JSON.*\n.*--dmlbench-json"):
        read_results(path)


def test_results_file_of_schema_1_is_a_clear_error_and_stays_byte_identical(tmp_path: Path) -> None:
    path = tmp_path / "results.json"
    write_results(path, make_run([make_case("bench_cases/test_x.py::test_y", world_size=2)]))
    old = path.read_bytes().replace(b'"schema": 2', b'"schema": 1')
    path.write_bytes(old)
    with pytest.raises(BaselineError) as info:
        read_results(path)
    message = str(info.value)
    assert message.startswith(f"{path}: written by an older pytest-dmlbench (schema 1")
    assert "--dmlbench-json" in message and "pip install 'pytest-dmlbench<0.3'" in message
    assert path.read_bytes() == old
    path.write_bytes(old.replace(b'"schema": 1', b'"schema": 2'))  # negative control: the same file at schema 2
    assert read_results(path).cases[0].world_size == 2
