"""Baselines end to end: save, compare unchanged, injected slowdown, corrupt files, identities, xdist saves,
reports.

Each inner pytest run costs seconds before it measures anything, so the runs whose outcome does not depend on
the test that reads them are shared (module scope): one project saved three times by ``ci/refresh_baselines.sh``
and one unchanged and one slowed comparison of it, which several tests read; a test that changes baselines
works on a copy of case a's saved one. The three corrupt-file tests share one project whose three cases' files
are each damaged their own way, and the world-size and isolation tests one project saved once."""

from __future__ import annotations

import json
import shutil
import subprocess
import xml.etree.ElementTree as ET
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import pytest

from tests import forkserver
from tests.conftest import Outcome, SharedSessions, clean_env, run_pytest, write_files

ONLY_A = "test_bench.py::test_step[a]"
# These tests check the plumbing, not the machine's noise: a wide threshold (set through the ini form)
# keeps sleep jitter on a loaded CI machine from ever looking like a change, and the injected changes
# (2.5x slower, 4x faster) are far beyond it. The step sleeps 50 ms: the jitter is added wake-up latency,
# the same milliseconds whatever the sleep, and a 20 ms step left one whole saved run 9.5 % slow (1.9 ms) in a
# fresh-clone CI run, which, with three saved runs, kept case a's throughput from being proven unchanged.
INI = "[pytest]\ndmlbench_threshold = 50\n"
CASES = """
    import os, time
    import pytest, torch.distributed as td

    DELAY_S = 0.05 * float(os.environ.get("SLOWDOWN", "1"))

    def step():
        time.sleep(DELAY_S)

    @pytest.mark.dmlbench(world_size=2)
    @pytest.mark.parametrize("variant", ["a", "b"])
    def test_step(dist, dmlbench, variant):
        dmlbench.pedantic(step, rounds=15, warmup=1, samples_per_call=32)
"""


def write_project(folder: Path) -> Path:
    write_files(folder, **{"test_bench.py": CASES, "pytest.ini": INI})
    return folder


@pytest.fixture
def project(tmp_path: Path) -> Path:
    return write_project(tmp_path)


def baseline_files(folder: Path) -> list[Path]:
    """The saved baselines: ``baselines/<machine-key>/<identity>/<case>.json``."""
    return sorted((folder / "baselines").glob("*/*/*.json"))


SAVES = 3  # saved runs before the stored rule judges a figure timed per round (its min_runs)
# What ci/refresh_baselines.sh saves by default. With three saved runs the between-runs prediction interval is
# +-8.0 spreads wide (t at 2 degrees of freedom, alpha 0.01); with five, +-4.1.
REFRESH_SAVES = 5


def save(folder: Path, *args: str, **env: str) -> None:
    """Save the baselines SAVES times, each a run of its own, as `ci/refresh_baselines.sh` does."""
    for _ in range(SAVES):
        saved = run_pytest(folder, "--dmlbench", "--dmlbench-save", *args, timeout=300, **env)
        assert saved.returncode == 0, saved.output


REPO = Path(__file__).resolve().parents[2]


def run_refresh_script(project: Path, saves: str | None = None) -> subprocess.CompletedProcess[str]:
    """``ci/refresh_baselines.sh`` on ``project``, saving ``saves`` times (its default when None)."""
    env = clean_env(DMLBENCH_CASES="test_bench.py", **({} if saves is None else {"DMLBENCH_SAVES": saves}))
    env["PATH"] = forkserver.path_with_python(env)  # this venv's pytest, forked where it can be
    return subprocess.run(["bash", str(REPO / "ci" / "refresh_baselines.sh"), "saved.json"], cwd=project,
                          capture_output=True, text=True, env=env, timeout=300)


@pytest.fixture(scope="module")
def refreshed(shared_sessions: SharedSessions) -> tuple[Path, Outcome]:
    """CASES (variants a and b) saved by ``ci/refresh_baselines.sh`` as the docs give it (REFRESH_SAVES times,
    its default), and the script's outcome. Read only: the tests below compare against it (comparing writes
    no baseline), or change a copy."""
    def build(project: Path) -> dict[str, Any]:
        done = run_refresh_script(write_project(project))
        return asdict(Outcome(done.returncode, done.stdout + done.stderr))

    done, project = shared_sessions.get("refreshed", build)
    return project, Outcome(**done)


@pytest.fixture(scope="module")
def saved(refreshed: tuple[Path, Outcome]) -> Path:
    project, done = refreshed
    assert done.returncode == 0, done.output
    return project


def copy_of_a(saved: Path, folder: Path) -> Path:
    """A project in ``folder`` holding only case a's saved baseline (copied from the shared save)."""
    write_project(folder)
    (source,) = [f for f in baseline_files(saved) if json.loads(f.read_text())["cases"][0]["nodeid"] == ONLY_A]
    target = folder / source.relative_to(saved)
    target.parent.mkdir(parents=True)
    shutil.copy2(source, target)
    return folder


@dataclass
class Compared:
    """One comparison of the saved project: its outcome and the JSON results, junit XML and GitHub step summary
    it wrote."""

    outcome: Outcome
    results: Path
    junit: Path
    summary: Path


def compare(shared_sessions: SharedSessions, project: Path, name: str, slowdown: str,
            **env: str) -> Compared:
    """Compare every case with the saved baselines (once per session), writing ``<name>.json``,
    ``<name>.xml`` and appending to ``<name>-summary.md`` (which holds an earlier step's text)."""
    results, junit, summary = (project / f"{name}{suffix}" for suffix in (".json", ".xml", "-summary.md"))

    def build(_: Path) -> dict[str, Any]:
        summary.write_text("earlier step\n")
        return asdict(run_pytest(project, "--dmlbench", "--dmlbench-json", results.name, "--junitxml", junit.name,
                                 SLOWDOWN=slowdown, GITHUB_STEP_SUMMARY=str(summary), timeout=300, **env))

    outcome, _ = shared_sessions.get(name, build)
    return Compared(Outcome(**outcome), results, junit, summary)


@pytest.fixture(scope="module")
def unchanged(shared_sessions: SharedSessions, saved: Path) -> Compared:
    """The same code as saved, compared: the negative control of ``slowed`` (which differs only in the slowdown
    and in printing its long lines unwrapped)."""
    return compare(shared_sessions, saved, "unchanged", "1")


@pytest.fixture(scope="module")
def slowed(shared_sessions: SharedSessions, saved: Path) -> Compared:
    """Every case's step 2.5x slower than saved, compared."""
    return compare(shared_sessions, saved, "slowed", "2.5", COLUMNS="1000")  # its long lines are matched whole


def test_save_then_unchanged_passes_with_verdicts_in_json(saved: Path, unchanged: Compared) -> None:
    files = baseline_files(saved)
    assert len(files) == 2 and {f.parent.name for f in files} == {"ws2-gloo-fork-persistent"}
    stored = json.loads(files[0].read_text())
    assert stored["schema"] == 2 and len(stored["cases"][0]["metrics"]["step_time_s"]["samples"]) == 15
    assert stored["run"]["launcher"] == "fork" and stored["run"]["isolation"] == "persistent"

    again = unchanged.outcome
    assert again.returncode == 0, again.output
    # the 80-column table groups the cases under their file and function, each by its parameters
    again.lines.fnmatch_lines(["test_bench.py", "  test_step", "  [[]a]*throughput*unchanged",
                               "verdicts on*unchanged*"])
    results = json.loads(unchanged.results.read_text())
    assert results["schema"] == 2
    assert {"cpu_model", "logical_cores", "torch", "backend"} <= set(results["machine"])
    assert results["run"]["world_size"] == 2
    case = results["cases"][0]
    assert case["world_size"] == 2 and case["backend"] == "gloo" and case["params"] == {"variant": "a"}
    verdicts = {v["metric"]: v for v in case["verdicts"]}
    assert verdicts["step_time_s"]["kind"] == "unchanged"
    assert verdicts["step_time_s"]["p_value"] is not None
    assert len(case["metrics"]["throughput_samples_per_s"]["samples"]) == 15


def test_injected_slowdown_fails_the_item_and_junit_records_it(slowed: Compared) -> None:
    slow = slowed.outcome
    assert slow.returncode == 1, slow.output
    slow.lines.fnmatch_lines([
        "*step_time_s regressed*threshold 50*one-sided t-test on log block medians p=* < alpha 0.01 "
        "(3 baseline vs 3 current blocks of rounds*",
        "*refresh the baseline: pytest --dmlbench --world-size 2 --dmlbench-backend gloo ?test_bench.py::test_step?a?? "
        "--dmlbench-save*",
        "*2 failed*",
    ])
    failures = [case for case in ET.parse(slowed.junit).iter("testcase") if case.find("failure") is not None]
    assert len(failures) == 2
    assert "step_time_s regressed" in (failures[0].find("failure").get("message") or "")  # type: ignore[union-attr]


def test_negative_control_same_code_is_not_flagged(unchanged: Compared) -> None:
    """The slowdown test above must be caused by the slowdown: the same run without it passes."""
    same = unchanged.outcome
    assert same.returncode == 0, same.output
    assert not [case for case in ET.parse(unchanged.junit).iter("testcase") if case.find("failure") is not None]


DAMAGES = {"garbage": "a", "truncated": "b", "old-schema": "c"}  # damage -> the variant whose baseline gets it


@dataclass
class Corrupted:
    """Three cases saved once, each baseline then damaged its own way (DAMAGES), compared, and saved again:
    the files as the damage left them, after the comparison and after the new save."""

    compared: Outcome
    saved_again: Outcome
    targets: dict[str, Path]
    broken: dict[str, str]
    after_compare: dict[str, str]
    after_save: dict[str, str]


@pytest.fixture(scope="module")
def corrupted(shared_sessions: SharedSessions) -> Corrupted:
    def build(project: Path) -> dict[str, Any]:
        write_files(project, **{"test_bench.py": CASES.replace('["a", "b"]', 'list("abc")'), "pytest.ini": INI})
        saving = run_pytest(project, "--dmlbench", "--dmlbench-save")
        assert saving.returncode == 0, saving.output
        files = {json.loads(f.read_text())["cases"][0]["params"]["variant"]: f for f in baseline_files(project)}
        targets = {damage: files[variant] for damage, variant in DAMAGES.items()}
        broken = {}
        for damage, target in targets.items():
            text = target.read_text()
            broken[damage] = {"garbage": "not json at all", "truncated": text[: len(text) // 2],
                              "old-schema": text.replace('"schema": 2', '"schema": 0', 1)}[damage]
            assert broken[damage] != text
            target.write_text(broken[damage])
        compared = run_pytest(project, "--dmlbench")
        after_compare = {damage: target.read_text() for damage, target in targets.items()}
        saved_again = run_pytest(project, "--dmlbench", "--dmlbench-save")
        after_save = {damage: target.read_text() for damage, target in targets.items()}
        return {"compared": asdict(compared), "saved_again": asdict(saved_again),
                "targets": {damage: str(target) for damage, target in targets.items()}, "broken": broken,
                "after_compare": after_compare, "after_save": after_save}

    built, _ = shared_sessions.get("corrupt", build)
    return Corrupted(Outcome(**built["compared"]), Outcome(**built["saved_again"]),
                     {damage: Path(target) for damage, target in built["targets"].items()}, built["broken"],
                     built["after_compare"], built["after_save"])


@pytest.mark.parametrize("damage", list(DAMAGES))
def test_corrupt_baseline_is_a_clear_error_and_the_file_is_untouched(corrupted: Corrupted, damage: str) -> None:
    target = corrupted.targets[damage]
    result = corrupted.compared
    assert result.returncode == 1
    result.lines.fnmatch_lines([f"FAILED test_bench.py::test_step[[]{DAMAGES[damage]}[]]*"])  # this case failed
    result.lines.fnmatch_lines([f"*{target.name}*"])
    assert "--dmlbench-save" in result.output
    assert "Traceback" not in result.output
    assert corrupted.after_compare[damage] == corrupted.broken[damage]
    # Only an explicit save replaces it.
    assert corrupted.saved_again.returncode == 0, corrupted.saved_again.output
    assert json.loads(corrupted.after_save[damage])["schema"] == 2


TINY = """
    import pytest

    @pytest.mark.dmlbench
    def test_tiny(dist, dmlbench):
        dmlbench.pedantic(lambda: None, rounds=4, warmup=0)
"""

FRESH_AND_PLAIN = """
    import pytest

    @pytest.mark.dmlbench(isolation="fresh")
    def test_fresh(dist, dmlbench):
        dmlbench.pedantic(lambda: None, rounds=4, warmup=0)

    @pytest.mark.dmlbench
    def test_plain(dist, dmlbench):
        dmlbench.pedantic(lambda: None, rounds=4, warmup=0)
"""


@dataclass
class Identities:
    """TINY and FRESH_AND_PLAIN saved once at world size 2, and the baselines that save wrote."""

    project: Path
    saved: list[Path]


@pytest.fixture(scope="module")
def identities(shared_sessions: SharedSessions) -> Identities:
    def build(project: Path) -> dict[str, Any]:
        write_files(project, **{"test_tiny.py": TINY, "test_iso.py": FRESH_AND_PLAIN, "pytest.ini": INI})
        return asdict(run_pytest(project, "--dmlbench", "--world-size", "2", "--dmlbench-save"))

    saving, project = shared_sessions.get("identities", build)
    assert saving["returncode"] == 0, saving["output"]
    return Identities(project, baseline_files(project))


@pytest.fixture(scope="module")
def compared_at_ws2(shared_sessions: SharedSessions, identities: Identities) -> dict[str, dict[str, Any]]:
    """Every identity case compared at world size 2, the size it was saved at: nodeid's name -> JSON case."""
    results = identities.project / "ws2.json"

    def build(_: Path) -> dict[str, Any]:
        return asdict(run_pytest(identities.project, "--dmlbench", "--world-size", "2", "--dmlbench-json",
                                 results.name))

    compared, _ = shared_sessions.get("identities-ws2", build)
    assert compared["returncode"] == 0, compared["output"]
    return {c["nodeid"].split("::")[-1]: c for c in json.loads(results.read_text())["cases"]}


def test_baselines_of_another_world_size_make_every_verdict_new_naming_them(
        identities: Identities, compared_at_ws2: dict[str, dict[str, Any]], tmp_path: Path) -> None:
    project = identities.project
    (saved,) = [f for f in identities.saved if f.name.startswith("test_tiny")]
    assert saved.parent.name == "ws2-gloo-fork-persistent"
    at_ws1 = run_pytest(project, "--dmlbench", "--world-size", "1", "test_tiny.py", "--dmlbench-json",
                        str(tmp_path / "ws1.json"))  # the project is shared: this test writes only its own folder
    assert at_ws1.returncode == 0, at_ws1.output
    (case,) = json.loads((tmp_path / "ws1.json").read_text())["cases"]
    assert case["world_size"] == 1 and case["verdicts"]
    for verdict in case["verdicts"]:
        assert verdict["kind"] == "new"
        assert ("no baseline at world size 1, launcher fork, isolation persistent on this machine (this case has "
                "baselines for: ws2-gloo-fork-persistent); save one with: pytest --dmlbench --world-size 1 "
                "--dmlbench-backend gloo test_tiny.py::test_tiny --dmlbench-save") in verdict["message"]
    # negative control: at world size 2 the same case is compared with its baseline
    case = compared_at_ws2["test_tiny"]
    assert case["world_size"] == 2
    assert case["verdicts"] and all(v["kind"] != "new" for v in case["verdicts"])
    assert baseline_files(project) == identities.saved  # comparing wrote nothing


def test_a_case_marked_fresh_keeps_its_baseline_under_the_fresh_identity(
        identities: Identities, compared_at_ws2: dict[str, dict[str, Any]]) -> None:
    folders = {f.stem.split("test_iso.py__")[-1].rsplit("-", 1)[0]: f.parent.name
               for f in identities.saved if not f.name.startswith("test_tiny")}
    # the marker's isolation counts, not the run's (negative control: the unmarked case beside it)
    assert folders == {"test_fresh": "ws2-gloo-fork-fresh", "test_plain": "ws2-gloo-fork-persistent"}, folders
    cases = {name: compared_at_ws2[name] for name in ("test_fresh", "test_plain")}
    assert cases["test_fresh"]["extra"]["isolation"] == "fresh" and "isolation" not in cases["test_plain"]["extra"]
    for case in cases.values():  # each found its own baseline
        assert case["verdicts"] and all(v["kind"] != "new" for v in case["verdicts"]), case["verdicts"]


def test_old_layout_files_are_reported_and_left_alone(saved: Path, tmp_path: Path) -> None:
    project = copy_of_a(saved, tmp_path)
    (saved_a,) = baseline_files(project)
    old = saved_a.parent.parent / saved_a.name  # where pytest-dmlbench 0.2 kept it
    old.write_bytes(saved_a.read_bytes().replace(b'"schema": 2', b'"schema": 1'))
    before = old.read_bytes()
    saved_a.unlink()
    result = run_pytest(project, "--dmlbench", ONLY_A, "--dmlbench-json", "r.json")
    assert result.returncode == 0, result.output
    result.lines.fnmatch_lines(["*BaselineWarning: 1 baseline file of an older layout (schema 1) is in *"])
    (case,) = json.loads((project / "r.json").read_text())["cases"]
    assert {v["kind"] for v in case["verdicts"]} == {"new"}
    assert "1 baseline file of an older layout (schema 1) is in" in case["verdicts"][0]["message"]
    assert old.read_bytes() == before and baseline_files(project) == []


def test_new_cases_and_no_compare(saved: Path, tmp_path: Path) -> None:
    project = copy_of_a(saved, tmp_path)  # case a saved REFRESH_SAVES times, case b never
    result = run_pytest(project, "--dmlbench")
    assert result.returncode == 0, result.output
    # per case: step time, throughput, peak memory, and one call's collective calls, bytes and FLOPs
    result.lines.fnmatch_lines(["verdicts on 12 figure(s) of * case(s): 6 new, 6 unchanged"])
    off = run_pytest(project, "--dmlbench", "--dmlbench-no-compare", SLOWDOWN="2")
    assert off.returncode == 0, off.output
    assert "regress" not in off.output.lower()


def test_improvement_is_reported_and_fails_only_when_asked(saved: Path, tmp_path: Path) -> None:
    """The step 4x faster than saved: 12.5 ms against 50 ms."""
    project = copy_of_a(saved, tmp_path)
    faster = run_pytest(project, "--dmlbench", ONLY_A, SLOWDOWN="0.25")
    assert faster.returncode == 0, faster.output
    faster.lines.fnmatch_lines(["*improvement*"])
    strict = run_pytest(project, "--dmlbench", ONLY_A, "--dmlbench-fail-on-improvement", SLOWDOWN="0.25")
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
    # every case was compared with its own three saved runs: whether noise let a case be proven unchanged within
    # the 50 % threshold is not what this test is about (under load one may stay inconclusive), but a verdict of
    # new would mean a lost baseline and a change one saved by the wrong worker
    step_times = {c["nodeid"]: v for c in cases for v in c["verdicts"] if v["metric"] == "step_time_s"}
    assert len(step_times) == 6, step_times
    for nodeid, verdict in step_times.items():
        assert verdict["baseline_runs"] == 3 and verdict["kind"] in ("unchanged", "inconclusive"), (nodeid, verdict)


def test_github_step_summary_is_appended(unchanged: Compared) -> None:
    assert unchanged.outcome.returncode == 0, unchanged.outcome.output
    text = unchanged.summary.read_text()
    assert text.startswith("earlier step\n")
    assert "## pytest-dmlbench results" in text and "step_time_s" in text


def test_refresh_script_saves_repeatedly_and_verdicts_use_the_run_history(
        refreshed: tuple[Path, Outcome], unchanged: Compared, slowed: Compared) -> None:
    project, done = refreshed
    assert done.returncode == 0, done.output
    stored = json.loads(baseline_files(project)[0].read_text())["cases"][0]["metrics"]["step_time_s"]
    assert len(stored["history"]) == REFRESH_SAVES - 1  # the medians of the earlier saves; the last one's samples
    again = unchanged.outcome
    assert again.returncode == 0, again.output
    verdict = json.loads(unchanged.results.read_text())["cases"][0]["verdicts"][0]
    assert verdict["baseline_runs"] == REFRESH_SAVES and verdict["between_runs_p"] is not None
    assert f"{REFRESH_SAVES} saved runs of the baseline, run-to-run spread" in verdict["message"]
    slow = slowed.outcome
    assert slow.returncode == 1, slow.output
    slow.lines.fnmatch_lines([f"*step_time_s regressed*between runs p=* < alpha 0.01 ({REFRESH_SAVES} saved runs*"])


def test_refresh_script_refuses_a_bad_save_count(project: Path) -> None:
    done = run_refresh_script(project, "three")
    assert done.returncode == 2 and "DMLBENCH_SAVES must be a positive whole number, got 'three'" in done.stderr
    assert baseline_files(project) == []
