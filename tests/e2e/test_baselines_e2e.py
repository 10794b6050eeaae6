"""Baselines end to end: save, compare unchanged, injected slowdown, corrupt files, identities, xdist saves,
reports."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from tests.conftest import clean_env, run_pytest, write_files

ONLY_A = "test_bench.py::test_step[a]"
# These tests check the plumbing, not the machine's noise: a wide threshold (set through the ini form)
# keeps sleep jitter on a loaded CI machine from ever looking like a change, and the injected changes
# (2.5x slower or faster) are far beyond it.
INI = "[pytest]\ndmlbench_threshold = 50\n"
CASES = """
    import os, time
    import pytest, torch.distributed as td

    DELAY_S = 0.02 * float(os.environ.get("SLOWDOWN", "1"))

    def step():
        time.sleep(DELAY_S)

    @pytest.mark.dmlbench(world_size=2)
    @pytest.mark.parametrize("variant", ["a", "b"])
    def test_step(dist, dmlbench, variant):
        dmlbench.pedantic(step, rounds=15, warmup=1, samples_per_call=32)
"""


@pytest.fixture
def project(tmp_path: Path) -> Path:
    write_files(tmp_path, **{"test_bench.py": CASES, "pytest.ini": INI})
    return tmp_path


def baseline_files(folder: Path) -> list[Path]:
    """The saved baselines: ``baselines/<machine-key>/<identity>/<case>.json``."""
    return sorted((folder / "baselines").glob("*/*/*.json"))


SAVES = 3  # saved runs before the stored rule judges a figure timed per round (its min_runs)


def save(folder: Path, *args: str, **env: str) -> None:
    """Save the baselines SAVES times, each a run of its own, as `ci/refresh_baselines.sh` does."""
    for _ in range(SAVES):
        saved = run_pytest(folder, "--dmlbench", "--dmlbench-save", *args, **env)
        assert saved.returncode == 0, saved.output


def test_save_then_unchanged_passes_with_verdicts_in_json(project: Path) -> None:
    save(project)
    files = baseline_files(project)
    assert len(files) == 2 and {f.parent.name for f in files} == {"ws2-gloo-fork-persistent"}
    stored = json.loads(files[0].read_text())
    assert stored["schema"] == 2 and len(stored["cases"][0]["metrics"]["step_time_s"]["samples"]) == 15
    assert stored["run"]["launcher"] == "fork" and stored["run"]["isolation"] == "persistent"

    again = run_pytest(project, "--dmlbench", "--dmlbench-json", "results.json")
    assert again.returncode == 0, again.output
    again.lines.fnmatch_lines(["test_bench.py::test_step[[]a]", "*throughput_samples_per_s*unchanged*",
                               "verdicts on*unchanged*"])
    results = json.loads((project / "results.json").read_text())
    assert results["schema"] == 2
    assert {"cpu_model", "logical_cores", "torch", "backend"} <= set(results["machine"])
    assert results["run"]["world_size"] == 2
    case = results["cases"][0]
    assert case["world_size"] == 2 and case["backend"] == "gloo" and case["params"] == {"variant": "a"}
    verdicts = {v["metric"]: v for v in case["verdicts"]}
    assert verdicts["step_time_s"]["kind"] == "unchanged"
    assert verdicts["step_time_s"]["p_value"] is not None
    assert len(case["metrics"]["throughput_samples_per_s"]["samples"]) == 15


def test_injected_slowdown_fails_the_item_and_junit_records_it(project: Path) -> None:
    save(project)
    slow = run_pytest(project, "--dmlbench", "--junitxml", "junit.xml", SLOWDOWN="2.5", COLUMNS="1000")
    assert slow.returncode == 1, slow.output
    slow.lines.fnmatch_lines([
        "*step_time_s regressed*threshold 50*one-sided t-test on log block medians p=* < alpha 0.01 "
        "(3 baseline vs 3 current blocks of rounds*",
        "*refresh the baseline: pytest --dmlbench --world-size 2 --dmlbench-backend gloo ?test_bench.py::test_step?a?? "
        "--dmlbench-save*",
        "*2 failed*",
    ])
    failures = [case for case in ET.parse(project / "junit.xml").iter("testcase") if case.find("failure") is not None]
    assert len(failures) == 2
    assert "step_time_s regressed" in (failures[0].find("failure").get("message") or "")  # type: ignore[union-attr]


def test_negative_control_same_code_is_not_flagged(project: Path) -> None:
    """The slowdown test above must be caused by the slowdown: the same run without it passes."""
    save(project)
    same = run_pytest(project, "--dmlbench", SLOWDOWN="1")
    assert same.returncode == 0, same.output


@pytest.mark.parametrize("damage", ["garbage", "truncated", "old-schema"])
def test_corrupt_baseline_is_a_clear_error_and_the_file_is_untouched(project: Path, damage: str) -> None:
    assert run_pytest(project, "--dmlbench", "--dmlbench-save", ONLY_A).returncode == 0
    (target,) = baseline_files(project)
    text = target.read_text()
    broken = {"garbage": "not json at all", "truncated": text[: len(text) // 2],
              "old-schema": text.replace('"schema": 2', '"schema": 0', 1)}[damage]
    target.write_text(broken)
    result = run_pytest(project, "--dmlbench", ONLY_A)
    assert result.returncode == 1
    result.lines.fnmatch_lines([f"*{target.name}*"])
    assert "--dmlbench-save" in result.output
    assert "Traceback" not in result.output
    assert target.read_text() == broken
    # Only an explicit save replaces it.
    assert run_pytest(project, "--dmlbench", "--dmlbench-save", ONLY_A).returncode == 0
    assert json.loads(target.read_text())["schema"] == 2


TINY = """
    import pytest

    @pytest.mark.dmlbench
    def test_tiny(dist, dmlbench):
        dmlbench.pedantic(lambda: None, rounds=4, warmup=0)
"""


def test_baselines_of_another_world_size_make_every_verdict_new_naming_them(tmp_path: Path) -> None:
    write_files(tmp_path, **{"test_tiny.py": TINY, "pytest.ini": INI})
    assert run_pytest(tmp_path, "--dmlbench", "--world-size", "2", "--dmlbench-save").returncode == 0
    (saved,) = baseline_files(tmp_path)
    assert saved.parent.name == "ws2-gloo-fork-persistent"
    at_ws1 = run_pytest(tmp_path, "--dmlbench", "--world-size", "1", "--dmlbench-json", "ws1.json")
    assert at_ws1.returncode == 0, at_ws1.output
    (case,) = json.loads((tmp_path / "ws1.json").read_text())["cases"]
    assert case["world_size"] == 1 and case["verdicts"]
    for verdict in case["verdicts"]:
        assert verdict["kind"] == "new"
        assert ("no baseline at world size 1, launcher fork, isolation persistent on this machine (this case has "
                "baselines for: ws2-gloo-fork-persistent); save one with: pytest --dmlbench --world-size 1 "
                "--dmlbench-backend gloo test_tiny.py::test_tiny --dmlbench-save") in verdict["message"]
    # negative control: at world size 2 the same case is compared with its baseline
    at_ws2 = run_pytest(tmp_path, "--dmlbench", "--world-size", "2", "--dmlbench-json", "ws2.json")
    assert at_ws2.returncode == 0, at_ws2.output
    (case,) = json.loads((tmp_path / "ws2.json").read_text())["cases"]
    assert case["verdicts"] and all(v["kind"] != "new" for v in case["verdicts"])
    assert baseline_files(tmp_path) == [saved]  # comparing wrote nothing


FRESH_AND_PLAIN = """
    import pytest

    @pytest.mark.dmlbench(isolation="fresh")
    def test_fresh(dist, dmlbench):
        dmlbench.pedantic(lambda: None, rounds=4, warmup=0)

    @pytest.mark.dmlbench
    def test_plain(dist, dmlbench):
        dmlbench.pedantic(lambda: None, rounds=4, warmup=0)
"""


def test_a_case_marked_fresh_keeps_its_baseline_under_the_fresh_identity(tmp_path: Path) -> None:
    write_files(tmp_path, **{"test_iso.py": FRESH_AND_PLAIN, "pytest.ini": INI})
    assert run_pytest(tmp_path, "--dmlbench", "--world-size", "2", "--dmlbench-save").returncode == 0
    folders = {f.stem.split("test_iso.py__")[-1].rsplit("-", 1)[0]: f.parent.name for f in baseline_files(tmp_path)}
    # the marker's isolation counts, not the run's (negative control: the unmarked case beside it)
    assert folders == {"test_fresh": "ws2-gloo-fork-fresh", "test_plain": "ws2-gloo-fork-persistent"}, folders
    compared = run_pytest(tmp_path, "--dmlbench", "--world-size", "2", "--dmlbench-json", "again.json")
    assert compared.returncode == 0, compared.output
    cases = {c["nodeid"].split("::")[-1]: c for c in json.loads((tmp_path / "again.json").read_text())["cases"]}
    assert cases["test_fresh"]["extra"]["isolation"] == "fresh" and "isolation" not in cases["test_plain"]["extra"]
    for case in cases.values():  # each found its own baseline
        assert case["verdicts"] and all(v["kind"] != "new" for v in case["verdicts"]), case["verdicts"]


def test_old_layout_files_are_reported_and_left_alone(project: Path) -> None:
    assert run_pytest(project, "--dmlbench", "--dmlbench-save", ONLY_A).returncode == 0
    (saved,) = baseline_files(project)
    old = saved.parent.parent / saved.name  # where pytest-dmlbench 0.2 kept it
    old.write_bytes(saved.read_bytes().replace(b'"schema": 2', b'"schema": 1'))
    before = old.read_bytes()
    saved.unlink()
    result = run_pytest(project, "--dmlbench", ONLY_A, "--dmlbench-json", "r.json")
    assert result.returncode == 0, result.output
    result.lines.fnmatch_lines(["*BaselineWarning: 1 baseline file of an older layout (schema 1) is in *"])
    (case,) = json.loads((project / "r.json").read_text())["cases"]
    assert {v["kind"] for v in case["verdicts"]} == {"new"}
    assert "1 baseline file of an older layout (schema 1) is in" in case["verdicts"][0]["message"]
    assert old.read_bytes() == before and baseline_files(project) == []


def test_new_cases_and_no_compare(project: Path) -> None:
    save(project, ONLY_A)
    result = run_pytest(project, "--dmlbench")
    assert result.returncode == 0, result.output
    result.lines.fnmatch_lines(["verdicts on 6 figure(s) of * case(s): 3 new, 3 unchanged"])
    off = run_pytest(project, "--dmlbench", "--dmlbench-no-compare", SLOWDOWN="2")
    assert off.returncode == 0, off.output
    assert "regress" not in off.output.lower()


def test_improvement_is_reported_and_fails_only_when_asked(project: Path) -> None:
    save(project, ONLY_A, SLOWDOWN="2.5")
    faster = run_pytest(project, "--dmlbench", ONLY_A)
    assert faster.returncode == 0, faster.output
    faster.lines.fnmatch_lines(["*improvement*"])
    strict = run_pytest(project, "--dmlbench", ONLY_A, "--dmlbench-fail-on-improvement")
    assert strict.returncode == 1
    strict.lines.fnmatch_lines(["*step_time_s improved*"])


def test_xdist_workers_save_and_compare_without_losing_cases(tmp_path: Path) -> None:
    write_files(tmp_path, **{"test_bench.py": CASES.replace('["a", "b"]', 'list("abcdef")'), "pytest.ini": INI})
    save(tmp_path, "-n", "2")
    assert len(baseline_files(tmp_path)) == 6
    compared = run_pytest(tmp_path, "--dmlbench", "-n", "2", "--dmlbench-json", "r.json")
    assert compared.returncode == 0, compared.output
    cases = json.loads((tmp_path / "r.json").read_text())["cases"]
    assert len(cases) == 6
    assert all(v["kind"] == "unchanged" for c in cases for v in c["verdicts"] if v["metric"] == "step_time_s")


def test_github_step_summary_is_appended(project: Path) -> None:
    summary = project / "summary.md"
    summary.write_text("earlier step\n")
    result = run_pytest(project, "--dmlbench", ONLY_A, GITHUB_STEP_SUMMARY=str(summary))
    assert result.returncode == 0, result.output
    text = summary.read_text()
    assert text.startswith("earlier step\n")
    assert "## pytest-dmlbench results" in text and "step_time_s" in text


REPO = Path(__file__).resolve().parents[2]


def run_refresh_script(project: Path, saves: str) -> subprocess.CompletedProcess[str]:
    env = clean_env(DMLBENCH_CASES="test_bench.py", DMLBENCH_SAVES=saves)
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"  # this venv's pytest
    return subprocess.run(["bash", str(REPO / "ci" / "refresh_baselines.sh"), "saved.json"], cwd=project,
                          capture_output=True, text=True, env=env, timeout=300)


def test_refresh_script_saves_repeatedly_and_verdicts_use_the_run_history(project: Path) -> None:
    done = run_refresh_script(project, "3")
    assert done.returncode == 0, done.stdout + done.stderr
    stored = json.loads(baseline_files(project)[0].read_text())["cases"][0]["metrics"]["step_time_s"]
    assert len(stored["history"]) == 2  # the medians of the first two saves; the third's samples
    again = run_pytest(project, "--dmlbench", "--dmlbench-json", "results.json")
    assert again.returncode == 0, again.output
    verdict = json.loads((project / "results.json").read_text())["cases"][0]["verdicts"][0]
    assert verdict["baseline_runs"] == 3 and verdict["between_runs_p"] is not None
    assert "3 saved runs of the baseline, run-to-run spread" in verdict["message"]
    slow = run_pytest(project, "--dmlbench", ONLY_A, SLOWDOWN="2.5", COLUMNS="1000")  # matched whole
    assert slow.returncode == 1, slow.output
    slow.lines.fnmatch_lines(["*step_time_s regressed*between runs p=* < alpha 0.01 (3 saved runs*"])


def test_refresh_script_refuses_a_bad_save_count(project: Path) -> None:
    done = run_refresh_script(project, "three")
    assert done.returncode == 2 and "DMLBENCH_SAVES must be a positive whole number, got 'three'" in done.stderr
    assert baseline_files(project) == []
