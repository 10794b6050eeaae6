"""Baseline store with real files: layout, round trip, every unusable-file path, atomic and concurrent saves."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from pytest_dmlbench.baseline.fingerprint import machine_key
from pytest_dmlbench.baseline.identity import BaselineIdentity
from pytest_dmlbench.baseline.store import BaselineStore, case_filename, load_folder
from pytest_dmlbench.errors import BaselineError
from tests.results.casefactory import MACHINE, make_case

NODEID = "bench_cases/test_ddp.py::test_step[ddp-ws4]"
WS4 = BaselineIdentity(4, "gloo", "fork", "persistent")  # make_case's world size and backend


def store_at(root: Path, identity: BaselineIdentity = WS4) -> BaselineStore:
    return BaselineStore(root, MACHINE, identity)


def test_save_and_load_round_trip(tmp_path: Path) -> None:
    store = store_at(tmp_path)
    assert not store.exists() and store.load_case(NODEID) is None
    case = make_case(NODEID, seed=3)
    path = store.save_case(case, {"world_size": 4})
    assert path.parent == tmp_path / machine_key(MACHINE) / "ws4-gloo-fork-persistent"
    assert path.name.startswith("test_step-ddp-ws4-") and path.name == case_filename(NODEID)
    assert store.exists()
    loaded = store.load_case(NODEID)
    assert loaded is not None and loaded.metrics["step_time_s"].samples == case.metrics["step_time_s"].samples
    assert loaded.params == {"strategy": "ddp"}
    document = json.loads(path.read_text())
    assert document["schema"] == 2 and document["machine"]["cpu_model"] == MACHINE["cpu_model"]
    assert [c["nodeid"] for c in document["cases"]] == [NODEID]
    assert document["run"] == {"world_size": 4, "launcher": "fork", "isolation": "persistent",
                               "identity": "ws4-gloo-fork-persistent"}


def test_each_identity_has_a_folder_of_its_own(tmp_path: Path) -> None:
    ray = store_at(tmp_path, BaselineIdentity(4, "gloo", "ray", "fresh"))
    path = ray.save_case(make_case(NODEID, seed=1), {"world_size": 4})
    assert path.parent.name == "ws4-gloo-ray-fresh"
    assert json.loads(path.read_text())["run"]["launcher"] == "ray"
    fork = store_at(tmp_path)
    assert not fork.exists() and fork.load_case(NODEID) is None  # negative control: another identity
    assert fork.other_identities(NODEID) == ["ws4-gloo-ray-fresh"] and fork.other_identities("t.py::x") == []
    fork.save_case(make_case(NODEID, seed=2))
    assert ray.other_identities() == ["ws4-gloo-fork-persistent"]


def test_a_case_is_saved_only_under_its_own_identity(tmp_path: Path) -> None:
    with pytest.raises(BaselineError, match=r"world size 2, backend gloo\) does not belong in the baselines of ws4"):
        store_at(tmp_path).save_case(make_case(NODEID, world_size=2))
    assert not (tmp_path / machine_key(MACHINE)).exists()


def test_a_file_moved_into_another_identity_folder_is_an_error(tmp_path: Path) -> None:
    ws2 = store_at(tmp_path, BaselineIdentity(2, "gloo", "fork", "persistent"))
    saved = ws2.save_case(make_case(NODEID, world_size=2))
    store = store_at(tmp_path)
    store.folder.mkdir(parents=True)
    moved = store.path_for(NODEID)
    moved.write_bytes(saved.read_bytes())
    with pytest.raises(BaselineError, match=r"holds a baseline of ws2-gloo-fork-persistent but lies in the folder "
                                            r"of ws4-gloo-fork-persistent"):
        store.load_case(NODEID)
    assert ws2.load_case(NODEID) is not None  # negative control: in its own folder it reads


def test_a_schema_1_file_is_a_clear_error_naming_the_command_and_stays_byte_identical(tmp_path: Path) -> None:
    store = store_at(tmp_path)
    path = store.save_case(make_case(NODEID))
    old = path.read_bytes().replace(b'"schema": 2', b'"schema": 1')
    path.write_bytes(old)
    with pytest.raises(BaselineError) as info:
        store.load_case(NODEID)
    message = str(info.value)
    assert message.startswith(f"{path}: written by an older pytest-dmlbench (schema 1, the layout before")
    assert "this version reads schema 2. The file is left as it is." in message
    assert (f"pytest --dmlbench --world-size 4 --dmlbench-backend gloo --dmlbench-baseline-dir {tmp_path} "
            f"'{NODEID}' --dmlbench-save") in message
    assert "pip install 'pytest-dmlbench<0.3'" in message
    assert path.read_bytes() == old


def test_an_old_layout_file_gets_the_command_that_writes_the_new_layout(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    store = store_at(tmp_path / "baselines")
    new = store.save_case(make_case(NODEID, world_size=4))
    old = store.machine_folder / new.name  # where pytest-dmlbench 0.2 kept it
    old.write_bytes(new.read_bytes().replace(b'"schema": 2', b'"schema": 1'))
    with pytest.raises(BaselineError) as info:
        load_folder(store.machine_folder)
    message = str(info.value)
    assert message.startswith(f"{old}: written by an older pytest-dmlbench (schema 1")
    assert f"pytest --dmlbench --world-size 4 --dmlbench-backend gloo '{NODEID}' --dmlbench-save" in message
    assert "ws4-gloo-fork-persistent folder of the new layout" in message
    assert store.load_case(NODEID) is not None  # the old file is never read by the store
    assert "1 baseline file of an older layout (schema 1) is in" in (store.old_layout_note() or "")
    assert store_at(tmp_path / "other").old_layout_note() is None  # negative control


def test_saved_baseline_drops_verdicts_and_keeps_nan_as_strict_json(tmp_path: Path) -> None:
    case = make_case(NODEID)
    case.metrics["step_time_s"].samples.append(float("nan"))
    from pytest_dmlbench.results import Verdict

    case.verdicts.append(Verdict("step_time_s", "new", None, 1.0, None, 10.0, None, "x"))
    path = store_at(tmp_path).save_case(case)
    text = path.read_text()
    json.loads(text, parse_constant=lambda c: pytest.fail(f"non-strict JSON constant {c}"))
    assert json.loads(text)["cases"][0]["verdicts"] == []


def test_node_ids_differing_only_in_punctuation_get_different_files() -> None:
    assert case_filename("t.py::f[a/b]") != case_filename("t.py::f[a-b]")


UNUSABLE: dict[str, Callable[[bytes], bytes]] = {
    "truncated": lambda good: good[: len(good) // 2],
    "empty": lambda good: b"",
    "not-json": lambda good: b"<html>not a baseline</html>",
    "binary": lambda good: b"\xff\xfe\x00garbage",
    "json-list": lambda good: b"[1, 2, 3]",
    "old-schema": lambda good: good.replace(b'"schema": 2', b'"schema": 0'),
    "future-schema": lambda good: good.replace(b'"schema": 2', b'"schema": 3'),
    "no-schema": lambda good: good.replace(b'"schema": 2,', b""),
    "missing-cases": lambda good: json.dumps({"schema": 2, "machine": {}}).encode(),
    "bad-sample": lambda good: good.replace(b'"samples": [', b'"samples": ["fast", ', 1),
    "nan-literal": lambda good: good.replace(b'"samples": [', b'"samples": [NaN, ', 1),
}
EXPECTED_PROBLEM = {
    "truncated": "is not valid JSON",
    "empty": "is empty",
    "not-json": "is not valid JSON",
    "binary": "is not UTF-8",
    "json-list": "holds a JSON list",
    "old-schema": "has schema 0, but this version of pytest-dmlbench reads schema 2",
    "future-schema": "has schema 3",
    "no-schema": "has schema None",
    "missing-cases": "does not match the results schema (missing field 'cases')",
    "bad-sample": "does not match the results schema (not a number: 'fast')",
    "nan-literal": "is not valid JSON (non-standard JSON constant NaN)",
}


@pytest.mark.parametrize("damage", sorted(UNUSABLE))
def test_unusable_file_is_a_clear_error_and_stays_untouched(tmp_path: Path, damage: str) -> None:
    store = store_at(tmp_path)
    path = store.save_case(make_case(NODEID))
    bad = UNUSABLE[damage](path.read_bytes())
    path.write_bytes(bad)
    with pytest.raises(BaselineError) as info:
        store.load_case(NODEID)
    message = str(info.value)
    assert message.startswith(f"{path}: ")
    assert EXPECTED_PROBLEM[damage] in message
    assert "Delete the file, or re-run with --dmlbench-save to replace it" in message
    with pytest.raises(BaselineError):
        store.load_all()
    assert path.read_bytes() == bad  # reading never repairs or overwrites
    # only an explicit save replaces it
    store.save_case(make_case(NODEID))
    assert store.load_case(NODEID) is not None


def test_file_of_another_case_under_this_name_is_an_error(tmp_path: Path) -> None:
    store = store_at(tmp_path)
    other = store.save_case(make_case("t.py::other"))
    target = store.path_for(NODEID)
    target.write_bytes(other.read_bytes())
    with pytest.raises(BaselineError, match=r"expected the baseline of .*test_step.* holds 't.py::other'"):
        store.load_case(NODEID)


def test_load_folder_without_files_says_how_to_create_baselines(tmp_path: Path) -> None:
    with pytest.raises(BaselineError, match=r"(?s)no baseline files .*--dmlbench-save"):
        load_folder(tmp_path)


def test_load_folder_of_a_machine_folder_names_its_identity_folders(tmp_path: Path) -> None:
    store = store_at(tmp_path)
    store.save_case(make_case(NODEID))
    with pytest.raises(BaselineError, match="It is a machine folder; give one of its identity folders: "
                                            "ws4-gloo-fork-persistent"):
        load_folder(store.machine_folder)
    assert [c.nodeid for c in load_folder(store.folder).cases] == [NODEID]


def test_failed_write_leaves_the_old_file_and_no_temp_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = store_at(tmp_path)
    path = store.save_case(make_case(NODEID, seed=1))
    before = path.read_bytes()

    def crash(src: str, dst: str) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", crash)  # the os module jsonio writes with
    with pytest.raises(OSError, match="No space left"):
        store.save_case(make_case(NODEID, seed=2))
    monkeypatch.undo()
    assert path.read_bytes() == before
    assert sorted(p.name for p in path.parent.iterdir()) == [path.name]


WRITER = """
import sys, time
from pathlib import Path
sys.path.insert(0, {tests!r})
from tests.results.casefactory import MACHINE, make_case
from pytest_dmlbench.baseline.identity import BaselineIdentity
from pytest_dmlbench.baseline.store import BaselineStore
root, worker, start = Path(sys.argv[1]), int(sys.argv[2]), Path(sys.argv[3])
store = BaselineStore(root, MACHINE, BaselineIdentity(4, "gloo", "fork", "persistent"))
(start.parent / f"ready-{{worker}}").touch()
while not start.exists():
    time.sleep(0.001)
for i in range(25):
    store.save_case(make_case(f"bench_cases/test_w.py::test_case[w{{worker}}-{{i}}]", seed=i))
    store.save_case(make_case("bench_cases/test_w.py::test_shared", seed=worker))
"""


def test_concurrent_saves_from_several_processes_lose_nothing(tmp_path: Path) -> None:
    script = tmp_path / "writer.py"
    script.write_text(WRITER.format(tests=str(Path(__file__).parent)))
    start = tmp_path / "start"
    root = tmp_path / "baselines"
    repo = str(Path(__file__).parents[2])
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([repo, os.environ.get("PYTHONPATH", "")])}
    workers = [
        subprocess.Popen([sys.executable, str(script), str(root), str(w), str(start)], env=env)
        for w in range(4)
    ]
    # Start all writers at the same moment, once every one has imported everything and is waiting.
    while len(list(tmp_path.glob("ready-*"))) < len(workers):
        assert all(w.poll() is None for w in workers), "a writer exited before the start"
        time.sleep(0.01)
    start.touch()
    assert [w.wait() for w in workers] == [0, 0, 0, 0]
    store = store_at(root)
    loaded = store.load_all()
    nodeids = sorted(c.nodeid for c in loaded.cases)
    expected = sorted(
        [f"bench_cases/test_w.py::test_case[w{w}-{i}]" for w in range(4) for i in range(25)]
        + ["bench_cases/test_w.py::test_shared"]
    )
    assert nodeids == expected
    assert not [p for p in store.folder.iterdir() if p.name.startswith(".tmp-")]
    shared = store.load_case("bench_cases/test_w.py::test_shared")
    assert shared is not None  # one complete file: the last writer's


def test_saved_files_are_readable_by_others(tmp_path: Path) -> None:
    path = store_at(tmp_path).save_case(make_case(NODEID))
    assert path.stat().st_mode & 0o777 == 0o644
