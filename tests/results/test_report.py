"""Terminal table, markdown summary and results files."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pytest_dmlbench.errors import BaselineError
from pytest_dmlbench.gates.stored.compare import CompareSettings, compare_run
from pytest_dmlbench.results import RunResults
from pytest_dmlbench.results.report import (
    append_step_summary,
    markdown_summary,
    oversubscribed,
    read_results,
    terminal_table,
    write_results,
)
from pytest_dmlbench.results.table import headers
from tests.results.casefactory import make_case, make_run

LONG_ID = "bench_cases/test_strategies.py::test_ddp_step[bucketed-resnet18-bs64-ws4-with-a-long-parameter-id]"


def compared_run() -> tuple[str, RunResults]:
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


def test_plain_table_is_one_line_per_case_with_units_and_says_nothing_was_compared() -> None:
    table = terminal_table(
        make_run([make_case("bench_cases/test_x.py::test_y", 0.010, seed=1, world_size=1)]), width=120
    )
    lines = table.splitlines()
    assert lines[0].startswith("units: as each metric's name says, SI bytes (1 MB = 10^6 B)")
    assert lines[1] == "cases under bench_cases/"
    assert lines[2].split() == ["case", "ws", "headline", "metric", "median"]
    row = lines[4]
    assert row.startswith("test_x.py::test_y")
    assert row.split()[1:3] == ["1", "throughput_samples_per_s"]
    assert row.rstrip().endswith("samples/s")
    assert "step_time_s" not in table and "peak_rss_mb" not in table  # only the headline metric
    assert "change" not in lines[2] and "oversubscribed" not in table
    assert "no verdicts: no case had a baseline or a REF to compare with" in table


def test_verbose_table_gives_every_metric_in_the_unit_its_name_says() -> None:
    table = terminal_table(
        make_run([make_case("bench_cases/test_x.py::test_y", 0.010, seed=1, world_size=1)]), verbose=True,
        width=120,
    )
    lines = table.splitlines()
    assert lines[2].split() == ["metric", "unit", "median", "IQR", "n"]
    step_row = next(line for line in lines if line.startswith("- step_time_s")).split()
    assert step_row[2] == "s" and step_row[3].startswith("0.0") and step_row[-1] == "20"  # seconds, as named
    ratio_row = next(line for line in lines if line.startswith("- compute_comm_ratio"))
    assert ratio_row.split()[2:4] == ["ratio", "3"]
    memory_row = next(line for line in lines if line.startswith("- peak_rss_mb")).split()
    assert memory_row[2:4] == ["MB", "513"] and memory_row[-1] == "20"


@pytest.mark.parametrize("width", [80, 120])
def test_compared_table_fits_the_width_shows_whole_short_ids_and_headline_verdicts(width: int) -> None:
    _, results = compared_run()
    table = terminal_table(results, width=width)
    assert max(len(line) for line in table.splitlines()) <= width
    lines = table.splitlines()
    header = next(line for line in lines if "headline" in line)
    assert header.split()[0] == "case" and header.split()[-2:] == ["change", "verdict"]  # the header kept
    file_line = lines.index("test_strategies.py")  # grouped: the file named once, its cases below
    test_part = LONG_ID.split("::")[1]
    shown = [line.strip() for line in lines[file_line + 1:file_line + 4]]
    count = next(n for n in (1, 2, 3) if "".join(shown[:n]) == test_part)  # whole, never elided
    assert count == 1 and "..." not in table
    row = lines[file_line + 1 + count]
    assert "+" in row and "slower" in row and row.rstrip().endswith("REGRESSION *")  # the headline's own verdict
    assert lines[lines.index("test_x.py") + 1].split()[:3] == ["test_new", "1", "throughput"]  # one line a case
    notes = lines[next(i for i, line in enumerate(lines) if line.startswith("REGRESSION")):]
    assert any(line.strip().startswith("REGRESSION step_time_s (wall time): +") and "slower" in line for line in notes)
    assert any(line.startswith("inconclusive  test_x.py::test_y") for line in lines)  # too few rounds: says so
    counts = " ".join(line.strip() for line in lines[lines.index(next(line for line in lines
                                                                      if line.startswith("verdicts on"))):])
    # the memory peaks are untestable: the baseline holds one saved run, and a peak is judged from three
    assert ("verdicts on 9 figure(s) of 3 case(s): 2 regression, 4 inconclusive (4 untestable, 0 unsettled), "
            "3 new") in counts
    assert ("settled: 2 of 6 judged figure(s) (found changed, or proven unchanged within the threshold); not settled: "
            "0 tested, 4 untestable") in counts
    assert "cases by headline verdict: 1 regression, 1 inconclusive, 1 new" in counts
    assert "no verdicts" not in table


def test_compared_verbose_table_has_baseline_change_and_p_values_when_they_fit() -> None:
    _, results = compared_run()
    table = terminal_table(results, verbose=True, width=120)
    header = next(line for line in table.splitlines() if line.split()[0] == "metric")
    assert header.split()[-3:] == ["baseline", "change", "verdict"]
    step_row = next(line for line in table.splitlines() if line.startswith("- step_time_s")
                    and "REGRESSION" in line)
    assert "REGRESSION p=" in step_row and " s " in step_row and "+" in step_row
    narrow = terminal_table(results, verbose=True, width=80)
    assert max(len(line) for line in narrow.splitlines()) <= 80
    assert "REGRESSION" in narrow and "p=" not in narrow  # the p-values go first


def test_the_compared_column_is_named_ref_when_the_run_was_paired() -> None:
    """In a --dmlbench-against run the column holds REF's re-measured median, not a stored baseline."""
    _, results = compared_run()
    for case in results.cases:
        case.extra["paired"] = {"ref": "HEAD~1"}
    verbose = terminal_table(results, verbose=True, width=120)
    header = next(line for line in verbose.splitlines() if line.split()[0] == "metric")
    assert header.split()[-3:] == ["REF", "change", "verdict"]
    assert headers(results, verbose=True)[-3:] == ["REF", "change", "verdict"]
    next(case for case in results.cases if case.verdicts).extra.pop("paired")
    assert headers(results, verbose=True)[-3:] == ["baseline/REF", "change", "verdict"]


def test_oversubscription_flag_follows_ranks_times_workers() -> None:
    run = make_run([make_case("t.py::a", world_size=1), make_case("t.py::b", world_size=2)], xdist_workers=2)
    flags = [oversubscribed(case, run) for case in run.cases]
    assert flags == [False, True]  # 1 x 2 = 2 cores is fine, 2 x 2 > 2 is not
    rows = [line.split() for line in terminal_table(run, width=120).splitlines() if line.startswith("t.py::")]
    assert [row[:3] for row in rows] == [["t.py::a", "1", "throughput_samples_per_s"],
                                         ["t.py::b", "2", "!"]]
    assert "! oversubscribed: ranks x xdist workers (2 worker(s)) > 2 cores" in terminal_table(run)


def test_cases_come_in_natural_order_of_sizes() -> None:
    ids = [f"c.py::test_bw[all_reduce-{size}]" for size in ("16MB", "1MB", "4KB", "64MB", "4MB")]
    table = terminal_table(make_run([make_case(nodeid, world_size=1) for nodeid in ids]), width=120)
    shown = [line.split()[0] for line in table.splitlines() if line.startswith("c.py::")]
    assert shown == [f"c.py::test_bw[all_reduce-{s}]" for s in ("4KB", "1MB", "4MB", "16MB", "64MB")]
    assert sorted(ids) != [f"c.py::test_bw[all_reduce-{s}]" for s in ("4KB", "1MB", "4MB", "16MB", "64MB")]


def test_markdown_summary_has_the_table_and_each_regression_message() -> None:
    nodeid, results = compared_run()
    text = markdown_summary(results)
    assert text.startswith("## pytest-dmlbench results\n")
    assert "| case " in text and "|---" in text and "<details>" in text and "| case / metric" in text
    assert nodeid in text  # whole, not wrapped or elided
    assert ("**Verdicts on 9 figure(s) of 3 case(s): 2 regression, 4 inconclusive (4 untestable, 0 unsettled), "
            "3 new**") in text
    assert "**Settled: 2 of 6 judged figure(s)" in text
    assert "**Cases by headline verdict: 1 regression, 1 inconclusive, 1 new**" in text and "no verdicts" not in text
    assert f"### regression: `{nodeid}` step_time_s" in text
    assert "--dmlbench-save" in text


def test_markdown_summary_says_when_nothing_was_compared() -> None:
    text = markdown_summary(make_run([make_case("bench_cases/test_x.py::test_y", world_size=1)]))
    assert "no verdicts: no case had a baseline or a REF to compare with" in text and "**Verdicts" not in text


def test_step_summary_is_appended_to_the_file_named_by_the_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _, results = compared_run()
    summary = tmp_path / "summary.md"
    summary.write_text("# earlier step\n")
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    assert append_step_summary(results) == summary
    text = summary.read_text()
    assert text.startswith("# earlier step\n## pytest-dmlbench results")
    monkeypatch.delenv("GITHUB_STEP_SUMMARY")
    assert append_step_summary(results) is None


def test_results_file_round_trip_is_strict_json(tmp_path: Path) -> None:
    _, results = compared_run()
    results.cases[0].metrics["step_time_s"].samples.append(float("nan"))
    path = tmp_path / "out" / "results.json"
    write_results(path, results)
    document = json.loads(path.read_text(), parse_constant=lambda c: pytest.fail(f"non-strict JSON: {c}"))
    assert document["cases"][0]["verdicts"][0]["kind"] == "regression"
    back = read_results(path)
    assert back.to_dict() == results.to_dict()


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


def test_a_compared_sweep_at_80_columns_is_one_line_a_case_under_the_case_header() -> None:
    ids = [f"bench_cases/test_collectives.py::test_collective_bandwidth[{op}-{size}]"
           for op in ("all_gather", "all_reduce", "broadcast") for size in ("4KB", "64KB", "16MB")]
    baseline = make_run([make_case(nodeid, 0.01, seed=n, world_size=1) for n, nodeid in enumerate(ids)])
    current = make_run([make_case(nodeid, 0.01, seed=100 + n, world_size=1) for n, nodeid in enumerate(ids)])
    table = terminal_table(compare_run(baseline, current, CompareSettings(min_runs=1)), width=80)
    lines = table.splitlines()
    assert max(len(line) for line in lines) <= 80
    header = next(i for i, line in enumerate(lines) if line.startswith("case "))
    assert lines[header + 2:header + 4] == ["test_collectives.py", "  test_collective_bandwidth"]
    rows = lines[header + 4:header + 4 + len(ids)]
    assert all(row.startswith("  [") and "samples/s" in row for row in rows), rows  # label and figures, one line
    assert sum("test_collectives.py" in line for line in lines[:header + 4 + len(ids)]) == 1  # the file once
