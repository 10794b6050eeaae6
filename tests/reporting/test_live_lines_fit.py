"""Live progress lines at 60, 80 and 200 columns, in a pipe and under xdist: every line fits, pytest's
progress row keeps its percentage after every case, and a file's name is given once, not on every case.

The cases here record their figures through a conftest hook instead of ranks, so that a run is a second:
what is checked is the printing, which is the same for a case measured on ranks."""

from __future__ import annotations

import re

import pytest

from pytest_dmlbench.reporting import progress
from pytest_dmlbench.results.table_layout import INDENT

pytest_plugins = ["pytester"]

CONFTEST = """
    import pytest
    from pytest_dmlbench.reporting.progress import LiveProgress
    from pytest_dmlbench.results import CaseResult, MetricResult
    from pytest_dmlbench.reporting.results_reporter import REPORT_ATTR

    def pytest_configure(config):
        if not hasattr(config, "workerinput"):
            config.pluginmanager.register(LiveProgress(config), "live-progress")

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_makereport(item, call):
        report = yield
        if report.when == "call" and item.name.startswith("test_bench"):
            case = CaseResult(item.nodeid, {}, 2, "gloo")
            case.add(MetricResult.of("throughput_samples_per_s", [13974.3, 13000.0, 15731.0]))
            setattr(report, REPORT_ATTR, case.to_dict())
        return report
"""
LONG = "a_rather_long_parameter-with-several-parts-that-does-not-fit-beside-its-figures-at-sixty"
ALPHA = f"""
    import pytest

    @pytest.mark.parametrize("variant", ["a", "b", "{LONG}"])
    def test_bench(variant):
        pass
"""
BETA = """
    def test_plain():
        pass

    def test_bench_one():  # the last item: its line comes after pytest's [100%]
        pass
"""
ROW = re.compile(r"^(test_\w+\.py )?[.]+ +\[ *(\d+)%\]$")


@pytest.fixture
def project(pytester: pytest.Pytester) -> pytest.Pytester:
    pytester.makeconftest(CONFTEST)
    pytester.makepyfile(test_alpha=ALPHA, test_beta=BETA)
    return pytester


def _between_collection_and_summary(lines: list[str]) -> list[str]:
    start = next(i for i, line in enumerate(lines) if line.startswith("collected") or "workers [" in line)
    end = next(i for i, line in enumerate(lines) if line.startswith("=") and i > start)
    return [line for line in lines[start + 1:end] if line]


def _check(lines: list[str], width: int, cases: int, *, xdist: bool = False) -> list[str]:
    """Every line within ``width``; every other line a row of result letters ending in its percentage,
    rising to 100 %; a row ended before each case's line (under xdist two workers' results can arrive
    together, so the lines of several cases may follow one row: a row before each run of case lines)."""
    assert all(len(line) <= width for line in lines), [line for line in lines if len(line) > width]
    live = [line.startswith(("dmlbench ", INDENT)) for line in lines]
    rows = [line for line, is_live in zip(lines, live, strict=True) if not is_live]
    assert all(ROW.match(row) for row in rows), rows
    percentages = [int(m.group(2)) for row in rows if (m := ROW.match(row))]
    assert percentages == sorted(percentages) and percentages[-1] == 100, rows
    runs = sum(1 for i, is_live in enumerate(live) if is_live and (i == 0 or not live[i - 1]))
    assert len(rows) >= (runs if xdist else cases), rows
    return [line for line in lines if line.startswith("dmlbench ")]


@pytest.mark.parametrize("width", [60, 80, 200])
def test_live_lines_fit_and_keep_the_progress_row(project: pytest.Pytester, monkeypatch: pytest.MonkeyPatch,
                                                  width: int) -> None:
    monkeypatch.setenv("COLUMNS", str(width))
    result = project.runpytest_inprocess("-p", "no:randomly", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=5)
    said = _check(_between_collection_and_summary(result.outlines), width, cases=4)
    assert len(said) == 4, said
    assert [line.count("test_alpha.py") for line in said[:3]] == [1, 0, 0]  # a file named once
    assert said[1].startswith("dmlbench test_bench[b]: throughput_samples_per_s 13974")
    assert "test_beta.py::test_bench_one" in said[3]
    if width < 100:  # the long id broken at natural points, its figures below it
        text = result.outlines[result.outlines.index(said[2]):]
        assert "".join(line.strip() for line in text[:3]).startswith(f"dmlbench test_bench[{LONG}]:")


def test_without_ending_the_row_the_check_fails(project: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    """Negative control: a live line printed straight after the result letter leaves rows without their
    percentage."""
    monkeypatch.setenv("COLUMNS", "80")
    monkeypatch.setattr(progress, "finish_progress_row", lambda reporter: None)
    result = project.runpytest_inprocess("-p", "no:randomly", "-p", "no:cacheprovider")
    with pytest.raises(AssertionError):
        _check(_between_collection_and_summary(result.outlines), 80, cases=4)


def test_live_lines_fit_and_keep_the_progress_row_under_xdist(project: pytest.Pytester,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "60")
    result = project.runpytest_subprocess("-p", "no:randomly", "-p", "no:cacheprovider", "-n", "2")
    result.assert_outcomes(passed=5)
    said = _check(_between_collection_and_summary(result.outlines), 60, cases=4, xdist=True)
    assert len(said) == 4 and sum("test_alpha.py" in line for line in said) < 3, said
