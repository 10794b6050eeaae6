"""The per-case baseline policy the plugin calls: save, compare, new, no-compare, identities, unusable and old
files."""

from __future__ import annotations

import warnings
from pathlib import Path

import pytest

from pytest_dmlbench.errors import BaselineError, BaselineWarning
from pytest_dmlbench.gates.stored.keeper import BaselineKeeper
from pytest_dmlbench.gates.thresholds import Thresholds
from pytest_dmlbench.gates.wording import failure_text as failure_report
from pytest_dmlbench.results import CaseResult
from tests.configfactory import make_config
from tests.results.casefactory import MACHINE, make_case

NODE = "bench_cases/test_ddp.py::test_step[ddp]"
SAVES = 3  # saved runs before a figure timed per round is judged (the compare rule's min_runs)


def fingerprint(backend: str) -> dict[str, object]:
    return {**MACHINE, "backend": backend}


def keeper(root: Path, **options: object) -> BaselineKeeper:
    return BaselineKeeper(make_config(root, **options), fingerprint_for=fingerprint)


def save(root: Path, median: float = 0.010, world_size: int = 4, **options: object) -> None:
    for seed in range(SAVES):
        keeper(root, save=True, **options).process(make_case(NODE, median, seed=seed, world_size=world_size))


def kinds(case: CaseResult) -> set[str]:
    return {v.kind for v in case.verdicts}


def test_save_then_compare_unchanged_then_slower(tmp_path: Path) -> None:
    save(tmp_path)
    unchanged = make_case(NODE, 0.010, seed=10)
    assert keeper(tmp_path).process(unchanged) == []
    assert kinds(unchanged) == {"unchanged"}
    slower = make_case(NODE, 0.013, seed=11)
    failing = keeper(tmp_path).process(slower)
    assert [v.metric for v in failing] == ["step_time_s", "throughput_samples_per_s"]
    report = failure_report(failing)
    assert "step_time_s" in report
    assert f"pytest --dmlbench --world-size 4 --dmlbench-backend gloo --dmlbench-baseline-dir {tmp_path} '{NODE}' " \
           "--dmlbench-save" in report



def test_the_thresholds_are_the_run_configs(tmp_path: Path) -> None:
    save(tmp_path)
    slower = make_case(NODE, 0.013, seed=11)  # 30 % slower: a regression at the default 10 %
    assert keeper(tmp_path, threshold_pct=50.0).process(slower) == []
    assert {v.threshold_pct for v in slower.verdicts} == {50.0} and "regression" not in kinds(slower)
    assert keeper(tmp_path).process(slower) != []  # negative control: the default threshold catches it
    assert keeper(tmp_path, cpu_threshold_pct=2.5, cpu_threshold_given=True).thresholds == Thresholds(10.0, 2.5)
    # the default CPU threshold judges only steps that compute
    assert keeper(tmp_path).thresholds == Thresholds(10.0, 10.0, cpu_where_computing=True)

def test_the_refresh_command_repeats_launcher_and_isolation(tmp_path: Path) -> None:
    save(tmp_path, launcher="ray", isolation="fresh")
    failing = keeper(tmp_path, launcher="ray", isolation="fresh").process(make_case(NODE, 0.013, seed=11))
    assert "--world-size 4 --dmlbench-backend gloo --dmlbench-launcher ray --dmlbench-isolation fresh " \
           f"--dmlbench-baseline-dir {tmp_path} '{NODE}' --dmlbench-save" in failure_report(failing)


def test_without_any_baseline_nothing_is_compared_and_a_new_case_is_new(tmp_path: Path) -> None:
    case = make_case(NODE)
    assert keeper(tmp_path).process(case) == [] and case.verdicts == []
    keeper(tmp_path, save=True).process(make_case("bench_cases/test_other.py::test_x"))
    assert keeper(tmp_path).process(case) == []
    assert kinds(case) == {"new"}
    assert all("new against the baseline: no baseline yet" in v.message for v in case.verdicts)


def test_a_case_saved_at_world_size_2_is_new_at_world_size_1_and_names_ws2(tmp_path: Path) -> None:
    save(tmp_path, world_size=2)
    at_ws1 = make_case(NODE, 0.013, seed=11, world_size=1)  # slower, but there is nothing to compare it with
    assert keeper(tmp_path).process(at_ws1) == []
    assert kinds(at_ws1) == {"new"}
    for verdict in at_ws1.verdicts:
        assert ("no baseline at world size 1, launcher fork, isolation persistent on this machine (this case has "
                "baselines for: ws2-gloo-fork-persistent); save one with: pytest --dmlbench --world-size 1 "
                f"--dmlbench-backend gloo --dmlbench-baseline-dir {tmp_path} '{NODE}' --dmlbench-save"
                ) in verdict.message
    # negative control: the same case at world size 2 is compared with its baseline, and regresses
    at_ws2 = make_case(NODE, 0.013, seed=11, world_size=2)
    assert [v.metric for v in keeper(tmp_path).process(at_ws2)] == ["step_time_s", "throughput_samples_per_s"]
    assert "new" not in kinds(at_ws2)


def test_launcher_and_isolation_are_part_of_the_identity(tmp_path: Path) -> None:
    save(tmp_path)
    for options in ({"launcher": "ray"}, {"isolation": "fresh"}):
        case = make_case(NODE, 0.013, seed=11)
        assert keeper(tmp_path, **options).process(case) == []
        assert kinds(case) == {"new"}
        assert "(this case has baselines for: ws4-gloo-fork-persistent)" in case.verdicts[0].message
    same = make_case(NODE, 0.013, seed=11)  # negative control: the identity it was saved under
    assert keeper(tmp_path).process(same) != [] and "new" not in kinds(same)


def test_an_empty_identity_makes_every_case_new_naming_what_the_machine_has(tmp_path: Path) -> None:
    keeper(tmp_path, save=True).process(make_case("bench_cases/test_other.py::test_x", world_size=2))
    case = make_case(NODE, world_size=1)
    assert keeper(tmp_path).process(case) == []
    assert kinds(case) == {"new"}
    assert ("no baseline at world size 1, launcher fork, isolation persistent on this machine (this machine has "
            "baselines for: ws2-gloo-fork-persistent; none for this case); save one with:") in case.verdicts[0].message


def test_old_layout_files_warn_once_and_make_cases_new(tmp_path: Path) -> None:
    save(tmp_path)
    store = keeper(tmp_path).store_for(make_case(NODE))
    saved = store.path_for(NODE)
    old = [store.machine_folder / saved.name, store.machine_folder / "test_y-0123456789abcdef.json"]
    for path in old:
        path.write_bytes(saved.read_bytes().replace(b'"schema": 2', b'"schema": 1'))
    before = [path.read_bytes() for path in old]
    saved.unlink()
    for extra in store.folder.iterdir():
        extra.unlink()
    store.folder.rmdir()
    gate = keeper(tmp_path)
    with pytest.warns(BaselineWarning) as caught:
        first, second = make_case(NODE, 0.013, seed=11), make_case("bench_cases/t.py::test_z", seed=12)
        assert gate.process(first) == [] and gate.process(second) == []
    assert len(caught) == 1  # once per process
    assert str(caught[0].message).startswith(
        f"2 baseline files of an older layout (schema 1) are in {store.machine_folder}; they are left untouched; "
        "this version neither compares with nor replaces files of that layout")
    assert kinds(first) == kinds(second) == {"new"}
    assert (f"no baseline at world size 4, launcher fork, isolation persistent on this machine; 2 baseline files of "
            f"an older layout (schema 1) are in {store.machine_folder}; they are left untouched; re-save with: "
            "pytest --dmlbench --world-size 4") in first.verdicts[0].message
    # --dmlbench-save writes the new layout and leaves the old files alone
    with pytest.warns(BaselineWarning, match="older layout"):
        keeper(tmp_path, save=True).process(make_case(NODE))
    assert saved.exists() and [path.read_bytes() for path in old] == before


def test_no_old_layout_warning_without_old_files(tmp_path: Path) -> None:
    save(tmp_path)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        keeper(tmp_path).process(make_case(NODE, seed=12))


def test_no_compare_and_backend_keys(tmp_path: Path) -> None:
    save(tmp_path)
    slower = make_case(NODE, 0.013, seed=11)
    assert keeper(tmp_path, compare=False).process(slower) == [] and slower.verdicts == []
    slower.backend = "nccl"  # another machine class: no baseline there
    assert keeper(tmp_path).process(slower) == [] and slower.verdicts == []


def test_fail_on_improvement(tmp_path: Path) -> None:
    save(tmp_path)
    faster = make_case(NODE, 0.007, seed=11)
    assert keeper(tmp_path).process(faster) == []
    assert {v.kind for v in keeper(tmp_path, fail_on_improvement=True).process(faster)} == {"improvement"}


def test_unusable_file_fails_comparison_until_an_explicit_save(tmp_path: Path) -> None:
    path = keeper(tmp_path, save=True).store_for(make_case(NODE)).save_case(make_case(NODE))
    path.write_text("{")
    with pytest.raises(BaselineError, match="is not valid JSON"):
        keeper(tmp_path).process(make_case(NODE))
    assert path.read_text() == "{"
    with pytest.warns(BaselineWarning, match="replaced an unreadable baseline"):
        keeper(tmp_path, save=True).process(make_case(NODE, seed=5))
    assert keeper(tmp_path).process(make_case(NODE, seed=6)) == []


def test_each_save_counts_toward_the_saved_runs_a_verdict_needs(tmp_path: Path) -> None:
    """``saved run 1 of 3``, ``2 of 3``, ``3 of 3`` in the table after each ``--dmlbench-save``; a save whose
    history starts over (an unreadable file replaced) counts from 1 again."""
    from pytest_dmlbench.gates.stored.between_runs import MIN_RUNS
    from pytest_dmlbench.results import RunResults
    from pytest_dmlbench.results.table_layout import terminal_table

    said = []
    for seed in range(MIN_RUNS + 1):
        case = make_case(NODE, 0.010, seed=seed)
        keeper(tmp_path, save=True).process(case)
        said.append(terminal_table(RunResults(MACHINE, "", {}, [case]), width=200).splitlines()[-1])
    assert said[0].startswith(f"saved run 1 of {MIN_RUNS}: baselines saved; save {MIN_RUNS - 1} more time(s)")
    assert said[1].startswith(f"saved run 2 of {MIN_RUNS}: baselines saved; save 1 more time(s)")
    assert said[2].startswith(f"saved run 3 of {MIN_RUNS}: baselines saved, enough for verdicts")
    assert said[3].startswith(f"saved run 4 ({MIN_RUNS} needed): baselines saved, enough")
    assert not any("no case had a baseline" in line for line in said)
    path = next(tmp_path.rglob("*.json"))
    path.write_text("{")  # unreadable: the next save starts the history over
    case = make_case(NODE, 0.010, seed=9)
    with pytest.warns(BaselineWarning):
        keeper(tmp_path, save=True).process(case)
    assert terminal_table(RunResults(MACHINE, "", {}, [case]), width=200).splitlines()[-1].startswith("saved run 1 of")
