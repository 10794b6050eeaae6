"""``--dmlbench-against baseline`` reads the commit of baselines saved in the identity layout."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pytest_dmlbench.baseline.identity import BaselineIdentity
from pytest_dmlbench.baseline.store import BaselineStore
from pytest_dmlbench.errors import RefError
from pytest_dmlbench.gates.paired.launch import recorded_commit
from tests.results.casefactory import MACHINE, make_case

WS4 = BaselineIdentity(4, "gloo", "fork", "persistent")


def test_the_commit_is_found_in_the_identity_layout(tmp_path: Path) -> None:
    store = BaselineStore(tmp_path, MACHINE, WS4)
    for index, commit in enumerate(["abc", "abc", "def"]):
        store.save_case(make_case(f"t.py::test_{index}"), {"commit": commit})
    assert store.path_for("t.py::test_0").parent.name == WS4.key
    assert recorded_commit(tmp_path) == "abc"


def test_the_older_layout_counts_only_when_the_new_one_records_no_commit(tmp_path: Path) -> None:
    store = BaselineStore(tmp_path, MACHINE, WS4)
    store.machine_folder.mkdir(parents=True)
    for name in ("a.json", "b.json"):  # two old files outvote one new file if both counted
        (store.machine_folder / name).write_text(json.dumps({"schema": 1, "run": {"commit": "old"}, "cases": []}))
    assert recorded_commit(tmp_path) == "old"  # the older layout alone still gives its commit
    store.save_case(make_case("t.py::test_new"), {"commit": "new"})
    assert recorded_commit(tmp_path) == "new"


def test_no_commit_anywhere_is_a_clear_error(tmp_path: Path) -> None:
    BaselineStore(tmp_path, MACHINE, WS4).save_case(make_case("t.py::test_x"), {})
    with pytest.raises(RefError, match=r"1 baseline file\(s\) under .* record no commit"):
        recorded_commit(tmp_path)
