"""``python -m pytest_dmlbench drift record|report``: a creeping history is reported in the terminal, the
markdown summary and a section of report.html."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from pytest_dmlbench.cli import EXIT_BAD_INPUT, EXIT_OK, EXIT_REGRESSION, main
from pytest_dmlbench.drift.render import SECTION_BEGIN
from pytest_dmlbench.plots.html import write_html
from pytest_dmlbench.results.jsonio import write_results
from tests.drift.nights import NODEID, night_results, write_nights

CREEP = [1.0] * 10 + [1.03 ** k for k in range(1, 6)] + [1.03 ** 5] * 2  # 3 % a night over 5 nights


def record_all(tmp_path: Path, levels: list[float]) -> Path:
    history = tmp_path / "history"
    for path in write_nights(tmp_path, levels):
        assert main(["drift", "record", str(path), "--history", str(history)]) == EXIT_OK
    return history


def a_report(tmp_path: Path) -> Path:
    path = tmp_path / "report.html"
    write_html(path, ["results.json"], [night_results(17, 1.0, "11" * 20)], [], [])
    return path


def test_a_creeping_history_is_reported_everywhere(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    history = record_all(tmp_path, CREEP)
    capsys.readouterr()
    page, summary = a_report(tmp_path), tmp_path / "summary.md"
    code = main(["drift", "report", "--history", str(history), "--markdown", str(summary), "--html", str(page),
                 "--fail-on-drift"])
    out = capsys.readouterr().out
    assert code == EXIT_REGRESSION
    lines = out.splitlines()
    assert lines[0].startswith("drift over 17 night(s), 010101010101 (2026-11-01) to 111111111111 (2026-11-17): "
                               "3 case-metric(s) judged; ")
    [creep] = [line for line in lines if line.startswith(f"  creep: {NODEID} step_time_s ")]
    # from the last unchanged night or the first creeping one (its 3 % is within the noise) to a creeping one
    assert re.search(r"% worse over \d steps between (0a0a0a0a0a0a|0b0b0b0b0b0b) \(2026-11-1[01]\) and "
                     r"(0c0c0c0c0c0c|0d0d0d0d0d0d|0e0e0e0e0e0e|0f0f0f0f0f0f) .*\(git log 0[ab]0[ab]", creep), creep
    assert "## Drift across nights" in summary.read_text()
    html = page.read_text()
    assert html.count(SECTION_BEGIN) == 1
    assert html.index('<section id="drift"><h2>Drift across nights</h2>') < html.index("<h2>Figures</h2>")
    assert f"<code>{NODEID}</code></td><td>step_time_s</td>" in html
    assert main(["drift", "report", "--history", str(history), "--html", str(page)]) == EXIT_OK
    assert page.read_text().count(SECTION_BEGIN) == 1  # the section is replaced, not added twice


def test_unchanged_nights_report_no_drift(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    history = record_all(tmp_path, [1.0] * 12)
    capsys.readouterr()
    assert main(["drift", "report", "--history", str(history), "--fail-on-drift"]) == EXIT_OK
    assert "no step or creep of at least 10 %" in capsys.readouterr().out


def test_bad_input_exits_2_with_the_fix(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["drift", "report", "--history", str(tmp_path / "none")]) == EXIT_BAD_INPUT
    assert "Record a night first: python -m pytest_dmlbench drift record" in capsys.readouterr().err
    history = record_all(tmp_path, [1.0] * 6)
    page = tmp_path / "not-a-report.html"
    page.write_text("<p>hello</p>")
    assert main(["drift", "report", "--history", str(history), "--html", str(page)]) == EXIT_BAD_INPUT
    assert "not a pytest-dmlbench report" in capsys.readouterr().err
    assert page.read_text() == "<p>hello</p>"


def test_nights_of_another_machine_are_left_out(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A runner whose CPU changed reads 30 % slower: no step, only the newest machine's nights are judged."""
    history = tmp_path / "history"
    for day in range(1, 17):
        run = night_results(day, 1.0 if day <= 8 else 1.3, f"{day:02x}" * 20)
        if day > 8:
            run.machine["cpu_model"] = "AMD EPYC 7763 64-Core Processor"
        path = tmp_path / f"results-{day}.json"
        write_results(path, run)
        assert main(["drift", "record", str(path), "--history", str(history)]) == EXIT_OK
    capsys.readouterr()
    assert main(["drift", "report", "--history", str(history), "--fail-on-drift"]) == EXIT_OK
    first = capsys.readouterr().out.splitlines()[0]
    assert first.startswith("drift over 8 night(s) (on machine linux-x86-64-epyc-7763-64-core-2c-")
    assert "8 night(s) of other machines left out), 090909090909 (2026-11-09) to " in first
    assert "no step or creep of at least 10 %" in first
