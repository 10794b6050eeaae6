"""The ``horovod`` name: known to the registry; without Horovod a clear error says how to install it."""

from __future__ import annotations

import importlib.util
import sys

import pytest
from torch import nn

from pytest_dmlbench.errors import ConfigError
from pytest_dmlbench.strategies import available, build
from pytest_dmlbench.strategies.horovod_allreduce import INSTALL_HINT


def test_the_registry_knows_horovod() -> None:
    assert "horovod" in available()


def test_without_horovod_the_error_says_how_to_install_it(monkeypatch: pytest.MonkeyPatch) -> None:
    if importlib.util.find_spec("horovod") is not None:
        monkeypatch.setitem(sys.modules, "horovod", None)
        monkeypatch.setitem(sys.modules, "horovod.torch", None)
    with pytest.raises(ConfigError, match="needs Horovod, which is not installed") as info:
        build("horovod", nn.Linear(2, 2), lr=0.1)
    assert INSTALL_HINT in str(info.value)
    assert "docs/how-to/horovod-0.28.1-cpu-torch2.patch" in str(info.value)
