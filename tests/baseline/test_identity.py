"""A baseline's identity: its folder name (and back) and the refresh command that reproduces a run's options."""

from __future__ import annotations

import shlex
from pathlib import Path

import pytest

from pytest_dmlbench.baseline.identity import BaselineIdentity, explicit_dir, refresh_command, refresh_template
from tests.results.casefactory import make_case

NODE = "bench_cases/test_ddp.py::test_step[ddp]"


@pytest.mark.parametrize("identity", [
    BaselineIdentity(1, "gloo", "fork", "persistent"),
    BaselineIdentity(2, "nccl", "ray", "fresh"),
    BaselineIdentity(16, "local", "fork", "fresh"),
])
def test_key_round_trip(identity: BaselineIdentity) -> None:
    assert BaselineIdentity.from_key(identity.key) == identity
    assert BaselineIdentity.is_key(identity.key)


def test_key_names_every_part() -> None:
    assert BaselineIdentity(2, "gloo", "fork", "persistent").key == "ws2-gloo-fork-persistent"


@pytest.mark.parametrize("name", [
    "ws0-gloo-fork-persistent", "ws2-gloo-spawn-persistent", "ws2-gloo-fork-shared", "ws2-gloo-fork",
    "linux-x86_64-xeon-2c-torch2.14.1-gloo-3f9a1c2b", "ws2-Gloo-fork-persistent", "ws02-gloo-fork-persistent",
])
def test_other_names_are_not_identity_keys(name: str) -> None:
    assert not BaselineIdentity.is_key(name)
    with pytest.raises(ValueError, match=r"expected ws<N>-<backend>-<launcher>-<isolation>|must be one of"):
        BaselineIdentity.from_key(name)


def test_invalid_parts_are_refused_with_the_accepted_values() -> None:
    with pytest.raises(ValueError, match="launcher must be one of fork, ray, simulated, got 'spawn'"):
        BaselineIdentity(2, "gloo", "spawn", "persistent")
    with pytest.raises(ValueError, match="world size must be an integer >= 1"):
        BaselineIdentity(0, "gloo", "fork", "persistent")


def test_of_case_takes_world_size_and_backend_from_the_case() -> None:
    case = make_case(NODE, world_size=3)
    assert BaselineIdentity.of_case(case, "ray", "fresh") == BaselineIdentity(3, "gloo", "ray", "fresh")
    assert BaselineIdentity.recorded(case, {}) == BaselineIdentity(3, "gloo", "fork", "persistent")
    assert BaselineIdentity.recorded(case, {"launcher": "ray"}).launcher == "ray"
    case.extra["isolation"] = "fresh"  # the case's marker set its own isolation: it wins over the run's
    assert BaselineIdentity.of_case(case, "fork", "persistent").isolation == "fresh"
    assert BaselineIdentity.recorded(case, {"isolation": "persistent"}).key == "ws3-gloo-fork-fresh"


def test_refresh_command_reproduces_the_run_options(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    other = tmp_path / "elsewhere"
    command = refresh_command(BaselineIdentity(4, "nccl", "ray", "fresh"), NODE, other)
    assert shlex.split(command) == [
        "pytest", "--dmlbench", "--world-size", "4", "--dmlbench-backend", "nccl", "--dmlbench-launcher", "ray",
        "--dmlbench-isolation", "fresh", "--dmlbench-baseline-dir", str(other), NODE, "--dmlbench-save",
    ]
    assert f"'{NODE}'" in command  # the brackets are shell-quoted


def test_refresh_command_leaves_defaults_out(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    command = refresh_command(BaselineIdentity(1, "gloo", "fork", "persistent"), NODE, tmp_path / "baselines")
    assert command == f"pytest --dmlbench --world-size 1 --dmlbench-backend gloo '{NODE}' --dmlbench-save"
    assert explicit_dir(Path("baselines")) is None and explicit_dir(Path("other")) == Path("other")
    # a case run in the pytest process ("local") has no --dmlbench-backend to repeat
    assert "--dmlbench-backend" not in refresh_command(BaselineIdentity(1, "local", "fork", "persistent"), NODE,
                                                       tmp_path / "baselines")


def test_refresh_template_keeps_braces_of_the_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    identity = BaselineIdentity(2, "gloo", "fork", "persistent")
    folder = tmp_path / "odd{name}"
    template = refresh_template(identity, folder)
    assert "{nodeid}" in template
    assert template.format(nodeid=shlex.quote(NODE)) == refresh_command(identity, NODE, folder)
