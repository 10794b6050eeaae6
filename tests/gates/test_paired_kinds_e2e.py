"""The paired gate judges every figure a case records, in a real git repository (REF committed, the change
in the working tree): in-process figures, one-reading figures, the confirmation stage and the budget.

The unchanged run and the scope runs are each made once (``shared_sessions``) for the tests that judge them:
the run-wide pair budget of 0.001 s applies to ``test_noisy`` alone, every other case naming the default
budget (60 s) in its marker, so one run shows both the budget's inconclusive and the other cases' verdicts.

Sleeps, not busy loops, so that the verdicts do not depend on how loaded the machine's cores are; changes
are several-fold against a 50 % threshold, so noise cannot flip them. Where a test needs a stage to end at its
minimum of 4 pairs (the first stage of ``test_first_stage_only`` in the unchanged run), the change is 20-fold: a
first stage goes on while its result is unclear, and a 5-fold one was left unclear after 4 pairs on a loaded
2-core host (one block of either side at three times its usual time is enough: 98 % interval 1.1x to 13x), so
that stage went on into the working tree's fast calls and never flagged it; 20-fold stays clear unless a block
runs at six times its usual time.
"""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from tests.conftest import Outcome, SharedSessions, run_pytest, write_files
from tests.gates.paired.gitrepo import make_repo

LIB_REF = """
    import pathlib
    import time

    IN_PROCESS_SLOW = 1.0
    READING = 10.0
    UNIT = "s"
    FIRST_CALLS_SLOW = 1.0
    NOISE_PHASE = 1.0
    ACCURACY = 1.0

    def in_process_step():
        time.sleep(0.002 * IN_PROCESS_SLOW)

    def step_slow_in_first_calls(counter, rank):
        # rank 0's steps (a step's time is the slowest rank's) are slow in the ordinary run (12 calls: the
        # calibration's 2 + 10 rounds), the working tree's warm-up block and the first stage's 4 blocks (7
        # calls each: 2 + 5 rounds, a step of at least 50 ms), not in the confirmation's
        if rank != 0 or FIRST_CALLS_SLOW == 1.0:  # REF's copy (1.0) leaves the count to the working tree's
            time.sleep(0.01)
            return
        calls = int(counter.read_text()) + 1 if counter.exists() else 1
        counter.write_text(str(calls))
        time.sleep(0.01 * (FIRST_CALLS_SLOW if calls <= 12 + 7 + 4 * 7 else 1.0))
"""
CASES = """
    import os
    import pathlib
    import random
    import time

    import pytest

    import lib

    @pytest.mark.dmlbench_gate(pair_budget=60)  # the default: a run-wide budget is for test_noisy
    def test_in_process(dmlbench_metrics, tmp_path):
        # (tmp_path: REF serves the rank case after this one once this item's fixtures are torn down)
        samples = []
        for _ in range(10):
            begin = time.perf_counter()
            lib.in_process_step()
            samples.append(time.perf_counter() - begin)
        (tmp_path / "samples.txt").write_text(str(samples))
        dmlbench_metrics.record("dispatch_overhead_s", samples)

    @pytest.mark.dmlbench_gate(pair_budget=60)
    def test_seeded_accuracy(dmlbench_metrics):
        # a deterministic figure (a seeded training's accuracy): every block of either side reads one value
        dmlbench_metrics.record("accuracy", [lib.ACCURACY])

    @pytest.mark.dmlbench(world_size=2, threshold=50, pair_budget=60)
    def test_one_reading(dist, dmlbench):
        dmlbench(time.sleep, 0.005)
        # a figure read once per run, +-20 % noise from run to run (rank 0's value is the one kept)
        # (the case's own RNG is seeded per case, so the noise comes from the system's)
        dmlbench.record("time_to_accuracy_s", lib.READING * random.SystemRandom().uniform(0.8, 1.2))

    @pytest.mark.dmlbench(world_size=2, threshold=10)
    def test_noisy(dist, dmlbench):
        dmlbench(time.sleep, 0.002)
        # -20 % and +20 % in turn from block to block, in opposite phase on the two sides (REF's NOISE_PHASE
        # is 1, the working tree's 3: its count runs one call ahead, the ordinary run's): block pairs read
        # 0.67x and 1.5x alternately, which four pairs cannot
        # settle against a 10 % threshold, whatever the machine does (random noise made it a coin toss).
        # Only runs whose working tree has NOISE_PHASE 3 run it: with equal phases both sides would share one
        # counter, and the order of a pair's two blocks could then give one side every low reading (a +50 %
        # "regression"). Its budget is the run's (--dmlbench-pair-budget)
        reading = lib.READING
        if dist.rank == 0:  # rank 0's value is the one kept
            counter = pathlib.Path(os.environ["COUNTER_DIR"]) / f"noisy-{lib.NOISE_PHASE}"
            calls = int(counter.read_text()) + 1 if counter.exists() else 1
            counter.write_text(str(calls))
            reading *= 1.2 if (calls + int(lib.NOISE_PHASE)) % 2 == 0 else 0.8
        dmlbench.record("time_to_accuracy_s", reading)

    @pytest.mark.dmlbench(world_size=2, threshold=50, pair_budget=60)
    def test_first_stage_only(dist, dmlbench):
        counter = pathlib.Path(os.environ["COUNTER_DIR"]) / "calls"
        dmlbench.pedantic(lib.step_slow_in_first_calls, args=(counter, dist.rank), rounds=5)

    @pytest.mark.dmlbench(world_size=2, threshold=50, pair_budget=60)
    def test_fraction(dist, dmlbench):
        dmlbench(time.sleep, 0.005)
        dmlbench.record("exposed_comm_fraction", [0.0] * 5)

    @pytest.mark.dmlbench(world_size=2, threshold=50, pair_budget=60)
    def test_unit(dist, dmlbench):
        dmlbench(time.sleep, 0.005)
        dmlbench.record("my_time", [1.0] * 5, unit=lib.UNIT, better="lower")

"""


def project(folder: Path, **changes: str) -> Path:
    """A repository whose REF is ``LIB_REF``; ``changes`` replace constants in the working tree's lib."""
    repo = make_repo(folder, **{"lib.py": LIB_REF, "test_cases.py": CASES, "pytest.ini": "[pytest]\n"})
    lib = LIB_REF
    for name, value in changes.items():
        lib = lib.replace(f"{name} = 1.0", f"{name} = {value}").replace(f"{name} = 10.0", f"{name} = {value}")
    write_files(repo, **{"lib.py": lib})
    return repo


def verdicts(results: Path) -> dict[str, dict[str, dict[str, object]]]:
    cases = json.loads(results.read_text())["cases"]
    return {c["nodeid"].split("::")[-1]: {v["metric"]: v for v in c["verdicts"]} for c in cases}


Verdicts = dict[str, dict[str, dict[str, object]]]
Paired = tuple[Outcome, Verdicts, set[str]]


def paired(repo: Path, *args: str) -> Paired:
    """A paired run against HEAD: its outcome, its verdicts by case and figure, and the cases that failed."""
    number = len(list(repo.parent.glob("results-*")))
    results, junit = repo.parent / f"results-{number}.json", repo.parent / f"junit-{number}.xml"
    counter = repo.parent / "counter"
    counter.mkdir(exist_ok=True)
    for used in [counter / "calls", *counter.glob("noisy-*")]:
        used.unlink(missing_ok=True)
    run = run_pytest(repo, "--dmlbench", "--dmlbench-against", "HEAD", "--dmlbench-json", str(results),
                     "--junitxml", str(junit), *args,
                     timeout=900, COUNTER_DIR=str(counter), COLUMNS="1000")  # messages on one line, matched whole
    failed = {case.get("name", "") for case in ET.parse(junit).iter("testcase") if case.find("failure") is not None}
    return run, verdicts(results), failed


def units_changed(repo: Path) -> Path:
    """REF records ``my_time`` in s, the working tree in ms."""
    (repo / "lib.py").write_text((repo / "lib.py").read_text().replace('UNIT = "s"', 'UNIT = "ms"'))
    return repo


def _unchanged_run(folder: Path) -> Paired:
    """Every case, with no scope asked: the first stage slowed alone, units changed, the noisy figure's phase
    opposed and its budget (the run's) spent at the minimum of pairs."""
    # 20-fold, not 5-fold: the first stage must settle at its 4 pairs however loaded the host (module docstring)
    repo = units_changed(project(folder / "repo", FIRST_CALLS_SLOW="20.0", NOISE_PHASE="3.0"))
    return paired(repo, "--dmlbench-pair-budget", "0.001")


def _untestable_scope_run(folder: Path) -> Paired:
    """An unsettled figure (test_noisy's) beside an untestable one (test_unit's) under the untestable scope."""
    repo = units_changed(project(folder / "repo", NOISE_PHASE="3.0"))
    return paired(repo, "-k", "noisy or test_unit", "--dmlbench-pair-budget", "0.001", "--dmlbench-fail-on-untestable")


def _inconclusive_scope_run(folder: Path) -> Paired:
    repo = project(folder / "repo", NOISE_PHASE="3.0")
    return paired(repo, "-k", "noisy", "--dmlbench-pair-budget", "0.001", "--dmlbench-fail-on-inconclusive")


@pytest.fixture
def unchanged_run(shared_sessions: SharedSessions) -> Paired:
    return shared_sessions.get("kinds-unchanged", _unchanged_run)[0]


@pytest.fixture
def untestable_scope_run(shared_sessions: SharedSessions) -> Paired:
    return shared_sessions.get("kinds-untestable-scope", _untestable_scope_run)[0]


def test_unchanged_code_gives_no_change_verdict_and_the_first_stage_alone_fails_nothing(
        unchanged_run: Paired) -> None:
    run, found, failed = unchanged_run
    assert run.returncode == 0 and not failed, run.output
    # a noisy one-reading figure is re-read in every block and judged on block pairs, never on one reading
    reading = found["test_one_reading"]["time_to_accuracy_s"]
    assert reading["kind"] in ("unchanged", "inconclusive"), reading
    assert "block pairs" in str(reading["message"])
    # the confirmation downgrade: flagged by the first stage, not repeated by the second, so no regression; and
    # not unchanged either, for both stages' pairs together (the first stage's slow ones among them) do not
    # prove it: tested, not settled
    downgraded = found["test_first_stage_only"]["step_time_s"]
    assert downgraded["kind"] == "inconclusive" and downgraded["inconclusive_cause"] == "unsettled", downgraded
    assert "first stage of" in str(downgraded["message"]) and "confirmed no" in str(downgraded["message"])
    assert "a regression in the first stage and not confirmed by the second" in str(downgraded["message"])
    assert downgraded["paired"]["stage"] == "confirmation" and downgraded["paired"]["scale"] == "ratio"  # type: ignore[index]
    # fractions are compared by their difference: a zero fraction has no ratio but a difference
    fraction = found["test_fraction"]["exposed_comm_fraction"]
    assert fraction["kind"] == "unchanged" and "pp" in str(fraction["message"]), fraction
    assert fraction["paired"]["scale"] == "points", fraction  # type: ignore[index]
    # in-process figures are re-measured on REF too
    in_process = found["test_in_process"]["dispatch_overhead_s"]
    assert in_process["kind"] == "unchanged" and "block pairs" in str(in_process["message"]), in_process
    # a figure that reads exactly alike in every block ends its stage at 2 pairs, not the minimum of 4
    seeded = found["test_seeded_accuracy"]["accuracy"]
    assert seeded["kind"] == "unchanged" and "over 2 block pairs" in str(seeded["message"]), seeded
    # REF records the figure in s, the working tree in ms: not comparable, and said so
    unit = found["test_unit"]["my_time"]
    assert unit["kind"] == "inconclusive" and "unit changed from 's' (REF) to 'ms'" in str(unit["message"]), unit
    assert "paired" not in unit, unit  # no test ran, so no estimate is recorded


def test_negative_controls_real_changes_fail_where_noise_did_not(tmp_path: Path) -> None:
    repo = project(tmp_path / "repo", IN_PROCESS_SLOW="5.0", READING="30.0", FIRST_CALLS_SLOW="5.0", ACCURACY="0.7")
    # the confirmation is given every pair the first stage had: slow throughout this time
    lib = (repo / "lib.py").read_text()
    (repo / "lib.py").write_text(lib.replace("if calls <= 12 + 7 + 4 * 7", "if calls <= 10**9"))
    run, found, _ = paired(repo, "-k", "not noisy")
    assert run.returncode == 1, run.output
    assert found["test_in_process"]["dispatch_overhead_s"]["kind"] == "regression"  # a 5x in-process slowdown
    assert found["test_one_reading"]["time_to_accuracy_s"]["kind"] == "regression"  # 3x a one-reading figure
    seeded = found["test_seeded_accuracy"]["accuracy"]  # a deterministic figure 30 pp worse: tested in full
    assert seeded["kind"] == "regression" and "over 2 block pairs" not in str(seeded["message"]), seeded
    confirmed = found["test_first_stage_only"]["step_time_s"]
    assert confirmed["kind"] == "regression" and "confirmed yes" in str(confirmed["message"])
    estimate = confirmed["paired"]  # the deciding stage's estimate, beyond the 50 % threshold
    assert isinstance(estimate, dict), estimate
    assert estimate["stage"] == "confirmation" and estimate["estimate"] > 1.5, estimate
    run.lines.fnmatch_lines(["*dispatch_overhead_s regressed against REF HEAD (*): * ms -> * ms, x* slower*"])


def test_what_the_budget_leaves_untested_is_inconclusive_and_fails_only_when_asked(
        unchanged_run: Paired, untestable_scope_run: Paired, shared_sessions: SharedSessions) -> None:
    run, found, failed = unchanged_run  # no scope asked: the run passes with the budget's inconclusive in it
    assert run.returncode == 0 and "test_noisy" not in failed, run.output
    noisy = found["test_noisy"]["time_to_accuracy_s"]
    assert noisy["kind"] == "inconclusive", noisy  # the budget stops at the minimum of 4 pairs, still unclear
    assert "over 4 block pairs" in str(noisy["message"])
    assert "pair budget of 0.001 s spent after 4 pairs" in str(noisy["message"])
    # a test ran over 4 pairs and could not settle the threshold: unsettled, not untestable
    assert noisy["inconclusive_cause"] == "unsettled"
    assert "smallest change this test could detect" in str(noisy["message"])
    # the untestable scope fails test_unit's untestable figure (below), not test_noisy's unsettled one
    untestable_only, scoped, failed = untestable_scope_run
    assert scoped["test_noisy"]["time_to_accuracy_s"]["inconclusive_cause"] == "unsettled", scoped["test_noisy"]
    assert "test_noisy" not in failed, untestable_only.output
    # test_unit's my_time is the one untestable figure; test_noisy's time_to_accuracy_s is unsettled, and so may
    # be its step time (4 pairs of a 0.001 s budget on a loaded machine) and its memory peak (kept worlds): the
    # summary counts what the results hold
    causes = [v["inconclusive_cause"] for case in scoped.values() for v in case.values() if v["kind"] == "inconclusive"]
    assert causes.count("untestable") == 1 and causes.count("unsettled") >= 1, scoped
    untestable_only.lines.fnmatch_lines([f"*{len(causes)} inconclusive (1 untestable, {causes.count('unsettled')} "
                                         "unsettled)*"])
    strict, _, failed = shared_sessions.get("kinds-inconclusive-scope", _inconclusive_scope_run)[0]
    assert strict.returncode == 1 and failed == {"test_noisy"}, strict.output
    strict.lines.fnmatch_lines(["*time_to_accuracy_s inconclusive (tested, not settled) against REF HEAD*"])


def test_an_untestable_figure_fails_under_the_untestable_scope(untestable_scope_run: Paired) -> None:
    run, found, failed = untestable_scope_run
    assert run.returncode == 1 and failed == {"test_unit"}, run.output
    unit = found["test_unit"]["my_time"]
    assert unit["kind"] == "inconclusive" and unit["inconclusive_cause"] == "untestable", unit
    run.lines.fnmatch_lines(["*my_time inconclusive (not tested) against REF HEAD*unit changed*"])


@pytest.mark.parametrize("value", ["0", "-3", "soon"])
def test_a_bad_pair_budget_is_a_usage_error(tmp_path: Path, value: str) -> None:
    write_files(tmp_path, **{"test_x.py": "def test_x():\n    pass\n"})
    run = run_pytest(tmp_path, "--dmlbench", "--dmlbench-pair-budget", value)
    assert run.returncode == 4, run.output
    run.lines.fnmatch_lines(["ERROR: --dmlbench-pair-budget: *"])


def test_a_bad_canary_mode_is_a_usage_error(tmp_path: Path) -> None:
    write_files(tmp_path, **{"test_x.py": "def test_x():\n    pass\n"})
    run = run_pytest(tmp_path, "--dmlbench", "--dmlbench-canary", "sometimes")
    assert run.returncode == 4, run.output
    run.lines.fnmatch_lines(["ERROR: --dmlbench-canary: 'sometimes' is not a canary mode; "
                             "choose one of on, off, during"])
