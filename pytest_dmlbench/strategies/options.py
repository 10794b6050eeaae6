"""The options a strategy accepts, read from the strategy itself, so that a file naming a strategy's options
can be checked before any rank runs it.

A strategy class's options are the keyword parameters of the ``__init__`` methods along its class chain
(their ``**common`` passes the rest on to the parent, down to :class:`~.base.Strategy`, whose ``lr``,
``momentum``, ``communicate`` and ``device`` are set by the harness, not by options), plus the parameters of
the method named by its ``hook_options_from`` attribute (DDP's comm-hook options). A factory function with
``**kwargs`` takes options no signature names: None.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

from pytest_dmlbench.strategies.base import Strategy, factory_for

SET_BY_THE_HARNESS = frozenset({"self", "model", "lr", "momentum", "communicate", "device"})
_NAMED = (inspect.Parameter.KEYWORD_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)


def _named(function: Callable[..., Any]) -> tuple[set[str], bool]:
    """A callable's named parameters, and whether it also takes ``**kwargs``."""
    parameters = inspect.signature(function).parameters.values()
    names = {p.name for p in parameters if p.kind in _NAMED}
    return names, any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters)


def option_names(name: str) -> frozenset[str] | None:
    """The options strategy ``name`` accepts; None when its factory takes arbitrary keywords."""
    factory = factory_for(name)
    if not (isinstance(factory, type) and issubclass(factory, Strategy)):
        names, open_ended = _named(factory)
        return None if open_ended else frozenset(names - SET_BY_THE_HARNESS)
    names = set()
    for cls in factory.__mro__:
        if "__init__" in vars(cls):
            names |= _named(vars(cls)["__init__"])[0]
        if cls is Strategy:
            break
    hook = getattr(factory, "hook_options_from", None)
    if hook is not None:
        names |= _named(getattr(factory, hook))[0]
    return frozenset(names - SET_BY_THE_HARNESS)
