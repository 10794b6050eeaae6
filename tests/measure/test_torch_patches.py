"""The registry every patch of torch goes through, on stand-in owners (a fresh module, fresh classes): what it
records, the order patches come off in, and the restores it refuses. The five real installers stacked are in
tests/world/test_torch_patches_stacked.py; the state guard's use in tests/world/test_guard.py."""

from __future__ import annotations

import types
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import torch.distributed as dist

from pytest_dmlbench.errors import PatchConflict
from pytest_dmlbench.measure import comm, torch_patches


def _original() -> str:
    return "original"


def _first() -> str:
    return "first"


def _second() -> str:
    return "second"


@pytest.fixture
def owner() -> Iterator[types.ModuleType]:
    """A module holding ``f``; whatever a test leaves installed on it is taken off afterwards."""
    module = types.ModuleType("stand_in")
    module.f = _original  # type: ignore[attr-defined]
    yield module
    for patch in reversed(torch_patches.installed()):
        if patch.owner is module:
            torch_patches.take_off(patch)


def _on(module: types.ModuleType) -> list[torch_patches.Patch]:
    return [patch for patch in torch_patches.installed() if patch.owner is module]


def _f(module: types.ModuleType) -> Callable[[], str]:
    function: Callable[[], str] = module.f
    return function


def test_an_install_is_recorded_listed_and_restored(owner: types.ModuleType) -> None:
    patch = torch_patches.install(owner, "f", _first, by="tests.first")
    assert _f(owner) is _first
    assert (patch.owner, patch.name, patch.original, patch.patched, patch.installer) == (
        owner, "f", _original, _first, "tests.first")
    assert patch.where == "stand_in.f" and patch.in_place()
    assert _on(owner) == [patch]
    torch_patches.restore(patch)
    assert _f(owner) is _original and _on(owner) == []
    torch_patches.restore(patch)  # already restored (the guard may have taken it off first): nothing happens
    assert _f(owner) is _original


def test_patches_come_off_newest_first(owner: types.ModuleType) -> None:
    first = torch_patches.install(owner, "f", _first, by="tests.first")
    second = torch_patches.install(owner, "f", _second, by="tests.second")
    assert second.original is _first
    with pytest.raises(PatchConflict, match=r"stand_in\.f: cannot restore tests\.first's patch while "
                                            r"tests\.second's patch of the same attribute.*newest first"):
        torch_patches.restore(first)
    assert _f(owner) is _second and _on(owner) == [first, second]  # refused: nothing changed
    torch_patches.restore_all([first, second])  # given oldest first; taken off newest first
    assert _f(owner) is _original and _on(owner) == []


def test_taking_patches_off_oldest_first_would_leave_the_newer_one_behind(owner: types.ModuleType) -> None:
    """Negative control for the order: what the registry's refusal prevents."""
    first = torch_patches.install(owner, "f", _first, by="tests.first")
    second = torch_patches.install(owner, "f", _second, by="tests.second")
    torch_patches.take_off(first)  # the forced, unchecked restore
    torch_patches.take_off(second)
    assert _f(owner) is _first  # the second patch's "original" was the first patch


def test_a_restore_over_a_replacement_is_refused(owner: types.ModuleType) -> None:
    patch = torch_patches.install(owner, "f", _first, by="tests.first")
    owner.f = _second  # type: ignore[attr-defined]  # someone else, not through the registry
    with pytest.raises(PatchConflict) as raised:
        torch_patches.restore(patch)
    assert str(raised.value) == (
        "stand_in.f: cannot restore tests.first's patch: the attribute was replaced since by "
        f"{__name__}._second, and restoring would drop that; whatever replaced it must put it back first "
        "(or install through pytest_dmlbench.measure.torch_patches)")
    assert _f(owner) is _second and _on(owner) == [patch] and not patch.in_place()


def test_restore_all_restores_what_it_can_and_names_every_conflict(owner: types.ModuleType) -> None:
    owner.g = _original  # type: ignore[attr-defined]
    on_f = torch_patches.install(owner, "f", _first, by="tests.first")
    on_g = torch_patches.install(owner, "g", _first, by="tests.g")
    owner.f = _second  # type: ignore[attr-defined]
    with pytest.raises(PatchConflict, match=r"stand_in\.f: cannot restore tests\.first's patch"):
        torch_patches.restore_all([on_f, on_g])
    assert owner.g is _original and _on(owner) == [on_f]


def test_a_class_gets_back_its_own_attribute_and_loses_a_copied_one() -> None:
    class Base:
        def m(self) -> str:
            return "base"

    class Sub(Base):
        def own(self) -> str:
            return "own"

    def patched(self: Any) -> str:
        return "patched"

    own = vars(Sub)["own"]
    inherited = torch_patches.install(Sub, "m", patched, by="tests.inherited")
    kept = torch_patches.install(Sub, "own", patched, by="tests.own")
    assert inherited.original is torch_patches.ABSENT and Sub().m() == Sub().own() == "patched"
    assert inherited.where == f"{__name__}.test_a_class_gets_back_its_own_attribute_and_loses_a_copied_one." \
                              "<locals>.Sub.m"
    torch_patches.restore_all([inherited, kept])
    assert "m" not in vars(Sub) and vars(Sub)["own"] is own and Sub().m() == "base"


def test_a_counted_function_replaced_inside_the_block_is_reported_when_it_ends() -> None:
    def mine(*args: Any, **kwargs: Any) -> None:
        return None

    original = dist.all_reduce
    conflict = (r"torch\.distributed\.all_reduce: cannot restore "
                r"pytest_dmlbench\.measure\.comm\.instrument_collectives's patch: "
                rf"the attribute was replaced since by {__name__}\..*mine")
    with pytest.raises(PatchConflict, match=conflict), comm.instrument_collectives():
        dist.all_reduce = mine  # type: ignore[assignment]
    left = [patch for patch in torch_patches.installed() if patch.installer.endswith("instrument_collectives")]
    assert [patch.where for patch in left] == ["torch.distributed.all_reduce"]  # every other one came off
    torch_patches.take_off(left[0])
    assert dist.all_reduce is original
