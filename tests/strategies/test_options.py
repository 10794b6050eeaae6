"""The options each strategy accepts are read from the strategy itself (no process group needed)."""

from __future__ import annotations

import pytest

from pytest_dmlbench.errors import ConfigError
from pytest_dmlbench.strategies import base
from pytest_dmlbench.strategies.options import option_names


def test_options_come_from_the_class_chain_and_the_comm_hook() -> None:
    assert option_names("bucketed") == frozenset({"bucket_mb", "broadcast_buffers"})
    assert option_names("local_sgd") == frozenset({"period"})
    # lr, momentum, device: set by the harness
    assert option_names("ddp") == frozenset({"bucket_mb", "broadcast_buffers"})
    # powersgd's comm-hook options join DDP's own (negative control: ddp, its parent, takes none of them)
    assert {"matrix_rank", "start_iter"} <= (option_names("powersgd") or set())
    assert not {"matrix_rank", "start_iter"} & (option_names("ddp") or set())


def test_a_factory_taking_any_keyword_cannot_be_checked(monkeypatch: pytest.MonkeyPatch) -> None:
    def open_factory(model: object, **options: object) -> object:
        raise AssertionError("never built here")

    def closed_factory(model: object, *, lr: float, width: int = 1) -> object:
        raise AssertionError("never built here")

    # registered for this test only (the registry is process-wide)
    monkeypatch.setitem(base._REGISTRY, "test-open-options", open_factory)
    monkeypatch.setitem(base._REGISTRY, "test-closed-options", closed_factory)

    assert option_names("test-open-options") is None
    assert option_names("test-closed-options") == frozenset({"width"})


def test_an_unknown_strategy_is_the_registry_s_error() -> None:
    with pytest.raises(ConfigError, match="unknown strategy 'nope'"):
        option_names("nope")
