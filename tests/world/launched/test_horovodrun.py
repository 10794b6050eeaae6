"""Ranks started by ``horovodrun`` engage the external-launcher mode.

Horovod itself is not installed with the test extra, so these tests set the variables ``horovodrun``
(Gloo mode) gives each rank, copied from horovod/runner/gloo_run.py (Horovod 0.28.1), and stand in for
``horovod.torch`` where its broadcast is needed. docs/how-to/torchrun-and-ray.md ("Horovod") says where
the real launcher was run.
"""

from __future__ import annotations

import subprocess
import sys
import types
from pathlib import Path

import pytest

from pytest_dmlbench.errors import ConfigError
from pytest_dmlbench.world.launched.engine import launched_externally, launcher_world_size
from pytest_dmlbench.world.launched.horovodrun import adopt_rank_variables, adopt_store_address, under_horovodrun
from tests import forkserver
from tests.conftest import clean_env, write_files
from tests.world.launched.test_torchrun_world import CASES, _finish, _free_loopback_port
from tests.world.listeners import listeners, named, process_tree


def horovodrun_env(rank: int, size: int) -> dict[str, str]:
    """What ``horovodrun -np SIZE`` on one host sets for slot ``rank`` (no torch.distributed variable)."""
    return {"HOROVOD_HOSTNAME": "localhost", "HOROVOD_RANK": str(rank), "HOROVOD_SIZE": str(size),
            "HOROVOD_LOCAL_RANK": str(rank), "HOROVOD_LOCAL_SIZE": str(size), "HOROVOD_CROSS_RANK": "0",
            "HOROVOD_CROSS_SIZE": "1", "HOROVOD_GLOO_RENDEZVOUS_ADDR": "127.0.0.1",
            "HOROVOD_GLOO_RENDEZVOUS_PORT": "41511", "HOROVOD_CONTROLLER": "gloo",
            "HOROVOD_CPU_OPERATIONS": "gloo", "HOROVOD_GLOO_IFACE": "lo"}


def test_horovodrun_ranks_are_detected_and_get_torch_rank_variables() -> None:
    environ = horovodrun_env(1, 4)
    assert launched_externally(environ)
    adopt_rank_variables(environ)
    assert {k: environ[k] for k in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE")} == {
        "RANK": "1", "WORLD_SIZE": "4", "LOCAL_RANK": "1", "LOCAL_WORLD_SIZE": "4"}
    assert launcher_world_size(environ, None) == 4


def test_without_horovods_rank_variables_no_launcher_is_seen() -> None:
    # Negative control: the rendezvous variables alone (or half of the rank ones) are not a rank.
    environ = horovodrun_env(1, 4)
    for name in ("HOROVOD_RANK", "HOROVOD_SIZE"):
        partial = {k: v for k, v in environ.items() if k != name}
        assert not under_horovodrun(partial) and not launched_externally(partial)


def test_variables_the_user_set_win_over_horovods() -> None:
    environ = {**horovodrun_env(1, 4), "RANK": "3"}
    adopt_rank_variables(environ)
    assert environ["RANK"] == "3" and environ["WORLD_SIZE"] == "4"


class FakeHorovod(types.ModuleType):
    """``horovod.torch`` as far as the store address needs it: rank 0's object reaches every rank."""

    def __init__(self, rank: int, from_rank0: object) -> None:
        super().__init__("horovod.torch")
        self._rank, self.from_rank0, self.initialised = rank, from_rank0, False
        self.sent: object = None

    def init(self) -> None:
        self.initialised = True

    def rank(self) -> int:
        return self._rank

    def broadcast_object(self, obj: object, root_rank: int, name: str) -> object:
        assert self.initialised and root_rank == 0
        self.sent = obj
        return obj if self._rank == 0 else self.from_rank0


def fake_horovod(monkeypatch: pytest.MonkeyPatch, hvd: types.ModuleType | None) -> None:
    package = types.ModuleType("horovod")
    package.torch = hvd  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "horovod", package if hvd is not None else None)
    monkeypatch.setitem(sys.modules, "horovod.torch", hvd)


def test_rank_0_picks_the_store_address_and_horovod_broadcasts_it(monkeypatch: pytest.MonkeyPatch) -> None:
    rank0 = FakeHorovod(0, None)
    fake_horovod(monkeypatch, rank0)
    environ = horovodrun_env(0, 2)
    store = adopt_store_address(environ)
    assert environ["MASTER_ADDR"] == "127.0.0.1" and environ["MASTER_PORT"] == str(store.port)
    # rank 0's store listens on that address only (env:// would have opened one on every interface)
    mine = [listener for listener in listeners(process_tree()) if listener.port == store.port]
    assert mine and all(listener.loopback and not listener.wildcard for listener in mine), named(mine)
    rank1 = FakeHorovod(1, ("node0", 29555))
    fake_horovod(monkeypatch, rank1)
    environ = horovodrun_env(1, 2)
    assert adopt_store_address(environ) is None  # a client of rank 0's store, through env://
    assert rank1.sent is None, "only rank 0 proposes an address"
    assert (environ["MASTER_ADDR"], environ["MASTER_PORT"]) == ("node0", "29555")


def test_a_given_store_address_needs_no_horovod_and_none_without_horovod_is_refused(
        monkeypatch: pytest.MonkeyPatch) -> None:
    fake_horovod(monkeypatch, None)
    environ = {**horovodrun_env(0, 2), "MASTER_ADDR": "h", "MASTER_PORT": "1"}
    assert adopt_store_address(environ) is None
    assert (environ["MASTER_ADDR"], environ["MASTER_PORT"]) == ("h", "1")
    with pytest.raises(ConfigError, match=r"horovod.torch cannot be imported.*horovodrun -x MASTER_ADDR"):
        adopt_store_address(horovodrun_env(0, 2))


def test_two_ranks_with_horovodruns_variables_run_cases_as_one_launched_world(tmp_path: Path) -> None:
    # The store address is passed in, as `horovodrun -x MASTER_ADDR=... -x MASTER_PORT=...` would.
    write_files(tmp_path, **{"test_x.py": CASES, "pytest.ini": "[pytest]\n"})
    store = {"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(_free_loopback_port())}
    envs = [{k: v for k, v in clean_env(**horovodrun_env(rank, 2), **store).items()
             if k not in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "TORCHELASTIC_RUN_ID")}
            for rank in (0, 1)]
    ranks = [subprocess.Popen(
        [forkserver.python(env), "-m", "pytest", "-p", "no:cacheprovider", "-p", "no:randomly", "--dmlbench", "-rs",
         "test_x.py"], cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env,
    ) for env in envs]
    rank0, rank1 = (_finish(proc) for proc in ranks)
    assert rank0.returncode != 0, rank0.output
    rank0.lines.fnmatch_lines([
        "*distributed case failed on rank(s) 1 of 2 (gloo)*",
        "*needs 3 rank(s); the launcher started 2*",
        "*1 failed, 1 passed, 1 skipped*",
    ])
    assert "test session starts" not in rank1.output, "only rank 0 reports"
