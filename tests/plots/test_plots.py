"""Plots and report.html rendered from a stored results file.

``data/results.json`` is a real run on the 2-core CI machine (collectives, strategy training, weak scaling,
the pipeline case and the data-loader sweep) plus three cases in the shape experiment files record
(per-epoch ``loss`` and ``accuracy``), written for this test.
"""

from __future__ import annotations

import base64
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("matplotlib", reason="plots need matplotlib: pip install -e '.[test]'")
from PIL import Image

from pytest_dmlbench.gates.stored.compare import CompareSettings, compare_run
from pytest_dmlbench.plots import render
from pytest_dmlbench.plots.figure import PIXELS, new_axes, save
from pytest_dmlbench.results.report import read_results, write_results
from tests.conftest import run_pytest, write_files

STORED = Path(__file__).parent / "data" / "results.json"
SINGLE_RUN_FIGURES = {"scaling.png", "communication.png", "throughput.png", "loader-sweep.png", "bandwidth.png",
                      "training.png", "rounds-busbw_gbps-1.png", "rounds-busbw_gbps-2.png", "rounds-memcpy_gbps.png",
                      *(f"rounds-throughput_samples_per_s-{n}.png" for n in (1, 2, 3))}


def drawn_share(path: Path) -> float:
    """Share of pixels that are not the background colour (0.0 for a blank image)."""
    with Image.open(path) as image:
        rgb = np.asarray(image.convert("RGB")).reshape(-1, 3).astype(np.uint32)
    # one integer per pixel: np.unique over rows (axis=0) took a third of a second per figure, this a hundredth
    pixels = (rgb[:, 0] << 16) | (rgb[:, 1] << 8) | rgb[:, 2]
    colours, counts = np.unique(pixels, return_counts=True)
    background = colours[counts.argmax()]
    return float((pixels != background).mean())


def check_png(path: Path) -> None:
    with Image.open(path) as image:
        image.verify()  # decodes the whole file
    with Image.open(path) as image:
        assert image.format == "PNG" and image.size == PIXELS, (path.name, image.size)
    assert drawn_share(path) > 0.03, f"{path.name} is (nearly) blank"


@pytest.fixture(scope="module")
def rendered(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("plots")
    proc = subprocess.run([sys.executable, "-m", "pytest_dmlbench", "plot", str(STORED), "--out", str(out)],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert f"report: {out / 'report.html'}" in proc.stdout
    assert "not drawn: trend: a trend needs two or more points" in proc.stdout
    return out


def test_every_figure_family_of_a_single_run_is_drawn(rendered: Path) -> None:
    assert {p.name for p in rendered.glob("*.png")} == SINGLE_RUN_FIGURES
    for png in rendered.glob("*.png"):
        check_png(png)


def test_blank_check_fails_on_an_empty_figure(tmp_path: Path) -> None:
    """Negative control for the not-blank check: an axes-less white figure of the same size."""
    fig, ax = new_axes("", "", "")
    ax.set_axis_off()
    save(fig, tmp_path / "blank.png", "blank", "")
    assert drawn_share(tmp_path / "blank.png") == 0.0
    with pytest.raises(AssertionError, match="blank"):
        check_png(tmp_path / "blank.png")


def test_report_html_embeds_every_plot_and_the_verdict_table(rendered: Path) -> None:
    page = (rendered / "report.html").read_text()
    embedded = dict(re.findall(r'data-file="([^"]+)" src="data:image/png;base64,([A-Za-z0-9+/=]+)"', page))
    assert set(embedded) == {p.name for p in rendered.glob("*.png")}
    for name, data in embedded.items():
        assert base64.b64decode(data) == (rendered / name).read_bytes(), name
    assert not re.search(r'(src|href)="(?!data:)', page), "the report must not load anything from elsewhere"
    results = read_results(STORED)
    for case in results.cases:
        assert case.nodeid in page
    assert "<th>verdict</th>" in page and "SI bytes (1 MB = 10^6 B)" in page and "<th>CPU</th><td>AMD EPYC</td>" in page


def test_trend_marks_the_verdicts_of_a_later_run(tmp_path: Path) -> None:
    """A second run with one case 3x slower, judged against the first: the trend figure is drawn per
    judged metric and the regression is in the report."""
    first = read_results(STORED)
    second = read_results(STORED)
    slow = next(c for c in second.cases if c.nodeid.endswith("test_strategy_training[allreduce]"))
    slow.metrics["step_time_s"].samples = [s * 3 for s in slow.metrics["step_time_s"].samples]
    slow.metrics["throughput_samples_per_s"].samples = [
        s / 3 for s in slow.metrics["throughput_samples_per_s"].samples]
    write_results(tmp_path / "second.json", compare_run(first, second, CompareSettings(min_runs=1)))
    out = tmp_path / "plots"
    report = render([("first", first), ("second", read_results(tmp_path / "second.json"))], out)
    names = {f.path.name for f in report.figures}
    assert {"trend-step_time_s.png", "trend-throughput_samples_per_s.png"} <= names
    assert not [s for s in report.skipped if s.family == "trend"]
    check_png(out / "trend-step_time_s.png")
    page = report.html.read_text()
    assert "regression: <code>bench_cases/test_training_benchmarks.py::test_strategy_training[allreduce]</code>" in page


def test_plot_without_matplotlib_says_how_to_install_it(tmp_path: Path) -> None:
    code = (
        "import sys\n"
        "class Block:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name == 'matplotlib' or name.startswith('matplotlib.'):\n"
        "            raise ImportError('No module named ' + repr(name))\n"
        "sys.meta_path.insert(0, Block())\n"
        "from pytest_dmlbench.cli import main\n"
        f"sys.exit(main(['plot', {str(STORED)!r}, '--out', {str(tmp_path / 'out')!r}]))\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "plots need matplotlib, which is not installed: pip install matplotlib" in proc.stderr
    assert "Traceback" not in proc.stderr and not (tmp_path / "out").exists()


def test_plot_of_a_missing_file_is_a_clear_error(tmp_path: Path) -> None:
    proc = subprocess.run([sys.executable, "-m", "pytest_dmlbench", "plot", str(tmp_path / "nope.json"), "--out",
                           str(tmp_path / "out")], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 2 and "nope.json: no such file or folder" in proc.stderr


def test_pytest_run_writes_plots_with_the_ini_option(tmp_path: Path) -> None:
    write_files(tmp_path, **{
        "pytest.ini": "[pytest]\ndmlbench_plots = plots-out\n",
        "test_bench.py": """
            import pytest

            @pytest.mark.dmlbench(world_size=1)
            def test_step(dist, dmlbench):
                dmlbench.pedantic(lambda: sum(range(1000)), rounds=5, warmup=1, samples_per_call=8)
        """,
    })
    result = run_pytest(tmp_path, "--dmlbench")
    assert result.returncode == 0, result.output
    result.lines.fnmatch_lines(["dmlbench: 2 plot(s) and the report written to plots-out/report.html"])  # and rounds
    check_png(tmp_path / "plots-out" / "throughput.png")
    assert "test_bench.py::test_step" in (tmp_path / "plots-out" / "report.html").read_text()


def test_a_run_whose_cases_record_only_an_accuracy_warns_nothing(tmp_path: Path) -> None:
    """The shape of the robust-training bench cases (one final accuracy, no per-epoch loss) once drew an
    empty training figure and put matplotlib's "No artists with labels" warning into pytest's summary."""
    write_files(tmp_path, **{
        "test_acc.py": """
            import pytest

            @pytest.mark.dmlbench(world_size=1)
            def test_accuracy(dist, dmlbench):
                dmlbench.record("accuracy", [0.81])
        """,
    })
    result = run_pytest(tmp_path, "--dmlbench", "--dmlbench-plots", "plots-out")
    assert result.returncode == 0, result.output
    assert "warnings summary" not in result.output and "Warning" not in result.output, result.output
    assert not (tmp_path / "plots-out" / "training.png").exists()
    check_png(tmp_path / "plots-out" / "accuracy.png")


def test_a_paired_run_keeps_ref_apart_from_the_stored_baselines_in_the_trend_and_the_banner() -> None:
    """A run judged against REF after a stored run: REF's medians are a series of their own in the trend (not
    points of the line of stored figures) and the banner names REF as the comparison; the same run judged
    against the stored figures (the negative control) has neither."""
    from pytest_dmlbench.plots.trend import trends
    from pytest_dmlbench.plots.verdict_html import banner
    from pytest_dmlbench.results import PairedEvidence

    first = read_results(STORED)
    stored_gate = compare_run(first, read_results(STORED), CompareSettings(min_runs=1))
    paired = compare_run(first, read_results(STORED), CompareSettings(min_runs=1))
    for case in paired.cases:
        case.extra["paired"] = {"ref": "HEAD~1"}
        for verdict in case.verdicts:
            verdict.paired = PairedEvidence("ratio", 1.0, 0.98, 1.02, 0.99, 8, 1.0, "first")
            verdict.baseline_median = (verdict.baseline_median or 1.0) * 1.5  # REF's median, not the stored one
    paired_trends = [t for found in trends([first, paired]).values() for t in found]
    assert paired_trends and all(t.positions == [0, 1] and t.ref_points and t.ref_points[0][0] == 1
                                 for t in paired_trends if t.judged)
    assert not any(t.ref_points for found in trends([first, stored_gate]).values() for t in found)
    said = banner(["baselines/x (stored baselines: trend history, not this run's comparison)", "this run"], paired)
    assert "Compared with: REF HEAD~1, re-measured beside the working tree in this run" in said
    assert "Compared with: the stored baselines" in banner(["first", "second"], stored_gate)
