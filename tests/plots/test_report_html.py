"""report.html opens on the verdict: the banner and the notable verdicts come before the figures, messages
wrap, and the machine is a readable table. Checked in the source here and in headless Chromium in
``test_report_browser.py``."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

pytest.importorskip("matplotlib", reason="plots need matplotlib: pip install -e '.[test]'")

from pytest_dmlbench.gates.stored.compare import CompareSettings, compare_run
from pytest_dmlbench.plots import render
from pytest_dmlbench.plots.machine_html import machine_table
from pytest_dmlbench.results import RunResults, Verdict
from pytest_dmlbench.results.report import read_results

STORED = Path(__file__).parent / "data" / "results.json"
SLOWED = "test_strategy_training[allreduce]"
FLAGGED = ("test_strategy_training[ddp]", "test_strategy_training[fp16]", "test_strategy_training[ps]")
LONG_MESSAGE = ("step_time_s regressed against the baseline: 24.72 ms -> 31.15 ms, +26 % slower; threshold 10 %; "
                "one-sided_t-test_on_log_block_medians_p=6.5e-05_<_alpha_0.01_(4_baseline_vs_4_current_blocks_of_"
                "rounds_(10_and_10_rounds));_run-to-run_noise_not_measured_(1_saved_run)_" * 3)
"""A message of about 460 characters with a 150-character run without spaces: it must wrap, not overflow."""


def regressed_run() -> tuple[RunResults, RunResults]:
    """The stored run and a second run of it judged against the first: one training case 3x slower (a real
    regression of the gate) and three more given a regression verdict with a long message."""
    first, second = read_results(STORED), read_results(STORED)
    for case in second.cases:
        if case.nodeid.endswith(SLOWED):
            case.metrics["step_time_s"].samples = [s * 3 for s in case.metrics["step_time_s"].samples]
            case.metrics["throughput_samples_per_s"].samples = [
                s / 3 for s in case.metrics["throughput_samples_per_s"].samples]
    judged = compare_run(first, second, CompareSettings(min_runs=1))
    for case in judged.cases:
        if case.nodeid.endswith(FLAGGED):
            case.verdicts = [Verdict("step_time_s", "regression", 0.02472, 0.03115, 1.26, 10.0, 6.5e-05,
                                     LONG_MESSAGE, change="+26 % slower")]
    return first, judged


def regressed_report(out: Path) -> tuple[Path, list[str]]:
    """report.html of :func:`regressed_run` and the node ids that regressed."""
    first, second = regressed_run()
    report = render([("first.json", first), ("second.json", second)], out)
    regressed = sorted({c.nodeid for c in second.cases for v in c.verdicts if v.kind == "regression"})
    return report.html, regressed


@pytest.fixture(scope="module")
def page(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, list[str]]:
    path, regressed = regressed_report(tmp_path_factory.mktemp("report"))
    return path.read_text(encoding="utf-8"), regressed


def test_four_cases_regress(page: tuple[str, list[str]]) -> None:
    _, regressed = page
    assert [n.rsplit("::", 1)[1] for n in regressed] == [SLOWED, *FLAGGED]


def test_the_banner_and_the_regressions_come_before_the_figures(page: tuple[str, list[str]]) -> None:
    text, regressed = page
    figures = text.index("<h2>Figures</h2>")
    assert text.index('class="banner bad"') < text.index('id="verdicts"') < figures
    assert "4 case(s) regressed" in text[:figures]
    for nodeid in regressed:
        assert f"<code>{nodeid}</code>" in text[:figures]


def test_messages_wrap_instead_of_running_off_in_pre(page: tuple[str, list[str]]) -> None:
    text, _ = page
    assert "<pre" not in text
    assert re.search(r"\.message \{[^}]*white-space: pre-wrap;[^}]*overflow-wrap: anywhere", text)
    assert text.count('<div class="message">') >= 4


def test_machine_table_shows_dates_and_units_not_python_reprs() -> None:
    machine = {"cpu_model": "AMD EPYC", "memory_gib": 24, "available_memory_gib": 20.8, "cpu_mhz": 2596.1,
               "boot_time": 1795477610.0, "gpus": [], "nccl": None, "cuda": "13.0", "scratch_bytes": 3_500_000_000,
               "custom": {"a": 1}, "physical_cores": 1, "backends_available": {"gloo": True, "nccl": False},
               "gpu_details": [{"index": 0, "name": "H200", "memory_gb": 143.8, "capability": "9.0"}],
               "distributed_env": {}}
    table = machine_table(machine)
    rows = dict(re.findall(r"<tr><th>([^<]*)</th><td>([^<]*)</td></tr>", table))
    assert rows["booted"] == "2026-11-23 23:46 UTC"
    assert rows["memory"] == "24 GiB" and rows["memory available at the start"] == "20.8 GiB"
    assert rows["CPU clock"] == "2596 MHz" and rows["GPUs"] == "none" and rows["NCCL"] == "none"
    assert rows["scratch bytes"] == "3.5 GB" and rows["custom"] == "a: 1"
    assert rows["physical cores"] == "1" and rows["backends available"] == "gloo"
    assert rows["GPU details"] == "0: H200, 143.8 GB, compute 9.0" and rows["distributed variables"] == "none"
    assert not any("_" in name for name in rows), list(rows)  # every row named by a label, none by a raw key
    assert not re.search(r"None|\[\]|1795477610|\{", table)
    assert list(rows)[:2] == ["CPU", "CPU clock"]


def test_a_run_without_verdicts_says_so_in_the_banner(tmp_path: Path) -> None:
    report = render([("only.json", read_results(STORED))], tmp_path)
    text = report.html.read_text(encoding="utf-8")
    assert 'class="banner none"' in text and "not compared with a baseline" in text
    assert 'id="verdicts"' not in text
