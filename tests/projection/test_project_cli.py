"""``python -m pytest_dmlbench project`` on a real results file (a trimmed world-size-4 gloo run of
bench_cases/test_collectives.py and test_training_benchmarks.py on a 2-core machine) and on bad input."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from pytest_dmlbench.cli import main
from pytest_dmlbench.projection.plot import INSTALL_HINT
from pytest_dmlbench.results.report import write_results
from tests.projection.synthetic import results, training_case

REAL = Path(__file__).parent / "data" / "results_gloo_ws4.json"
COLLECTIVES = Path(__file__).parent / "data" / "results_gloo_ws2-4_collectives.json"


def run(capsys: pytest.CaptureFixture[str], *args: str | Path) -> tuple[int, str, str]:
    try:
        code = main([str(a) for a in args])
    except SystemExit as exc:  # argparse's own usage errors
        code = int(exc.code or 0)
    out, err = capsys.readouterr()
    return code, out, err


def test_real_results_give_a_calibration_a_check_and_projections(capsys: pytest.CaptureFixture[str],
                                                                  tmp_path: Path) -> None:
    code, out, _ = run(capsys, "project", REAL, "--ranks", "8", "1024", "--json", tmp_path / "p.json")
    assert code == 0
    assert "network used: alpha = " in out and "(fit of all_reduce)" in out
    for ws in (1, 2, 4):
        assert f"test_ddp_weak_scaling[ws{ws}]" in out
    assert "test_ddp_weak_scaling[ws4] !" in out  # 4 ranks on 2 cores
    document = json.loads((tmp_path / "p.json").read_text())
    checks = {c["nodeid"].rsplit("::", 1)[-1]: c for c in document["checks"]}
    ws2 = checks["test_ddp_weak_scaling[ws2]"]
    # the compute of the case's own twin plus the fitted ring exchange lands within 25 % of the measured step
    assert abs(ws2["own_step_s"] / ws2["measured_step_s"] - 1) < 0.25
    ring_1024 = [p for p in document["projections"]["test_ddp_weak_scaling"]
                 if p["algorithm"] == "ring" and p["ranks"] == 1024 and not p["overlap"]]
    assert len(ring_1024) == 1 and 0 < ring_1024[0]["efficiency"] < 1


def test_one_world_size_checks_held_out_sizes_and_says_why_not_world_sizes(capsys: pytest.CaptureFixture[str],
                                                                           tmp_path: Path) -> None:
    code, out, _ = run(capsys, "project", REAL, "--ranks", "8", "--json", tmp_path / "p.json")
    assert code == 0
    assert "Held-out check of the collective model" in out
    assert "world size held out: not checked, every collective was measured at one world size (4)" in out
    document = json.loads((tmp_path / "p.json").read_text())
    assert len(document["held_out"]) == 20
    medians = document["held_out_median_abs_error"]
    assert medians["world_size"] is None and 0 < medians["size"] < 1


def test_collectives_alone_give_the_calibration_and_its_held_out_check(capsys: pytest.CaptureFixture[str],
                                                                       tmp_path: Path) -> None:
    code, out, _ = run(capsys, "project", COLLECTIVES, "--json", tmp_path / "p.json")
    assert code == 0
    assert "network used: alpha = " in out and "| all   " in out
    assert "not checked" not in out
    assert "Nothing to project: the results hold no training cases" in out
    medians = json.loads((tmp_path / "p.json").read_text())["held_out_median_abs_error"]
    assert medians["size"] > 0 and medians["world_size"] > 0
    code, _, err = run(capsys, "project", COLLECTIVES, "--plot", tmp_path / "x.png")
    assert code == 2 and "need training cases" in err


def test_plot_is_written(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    pytest.importorskip("matplotlib", reason="matplotlib is the optional 'plot' extra")
    png = tmp_path / "speedup.png"
    code, out, _ = run(capsys, "project", REAL, "--case", "weak", "--plot", png)
    assert code == 0, out
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_plot_without_matplotlib_says_how_to_install(capsys: pytest.CaptureFixture[str], tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # makes `import matplotlib` fail
    code, _, err = run(capsys, "project", REAL, "--case", "weak", "--plot", tmp_path / "x.png")
    assert code == 2
    assert INSTALL_HINT in err


@pytest.mark.parametrize(("ranks", "problem"), [("0", "0 is too small"), ("-4", "-4 is too small"),
                                                ("two", "'two' is not a whole number")])
def test_non_positive_rank_count_is_a_usage_error(capsys: pytest.CaptureFixture[str], ranks: str, problem: str) -> None:
    code, _, err = run(capsys, "project", REAL, "--ranks", "8", ranks)
    assert code == 2
    assert f"argument --ranks: {problem}; give an integer >= 1, e.g. --ranks 4" in err


def test_missing_file(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    code, _, err = run(capsys, "project", tmp_path / "nope.json")
    assert code == 2
    assert "nope.json: no such file" in err and "--dmlbench-json" in err


def test_results_without_collective_cases(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    path = tmp_path / "training_only.json"
    write_results(path, results([training_case(1, 0.02), training_case(2, 0.03)]))
    code, _, err = run(capsys, "project", path)
    assert code == 2
    assert "no collective cases" in err and "--latency-us" in err
    code, out, _ = run(capsys, "project", path, "--latency-us", "50", "--bandwidth-gbps", "2")
    assert code == 0 and "(given (--latency-us, --bandwidth-gbps))" in out


def test_unknown_case_filter(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(capsys, "project", REAL, "--case", "no-such-family")
    assert code == 2 and "no-such-family" in err
