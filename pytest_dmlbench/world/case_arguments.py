"""How a case's arguments reach the ranks of a world that keeps its ranks (forked processes, Ray actors):
direct parametrize values from the ranks' own registry, other fixture values pickled.
"""

from __future__ import annotations

import pickle
from collections.abc import Mapping
from typing import Any

from pytest_dmlbench.errors import CaseNotRunnable

RANK_SIDE_FIXTURES = ("dist", "dmlbench")


def split_arguments(argnames: tuple[str, ...], funcargs: Mapping[str, Any],
                    params: Mapping[str, Any]) -> tuple[tuple[str, ...], bytes]:
    """Direct parametrize values come from the ranks' own copy; other fixture values are pickled.

    Raises CaseNotRunnable naming the fixture whose value cannot be pickled.
    """
    from_registry = []
    values = {}
    for name in argnames:
        if name in RANK_SIDE_FIXTURES:
            continue
        if name in params and funcargs.get(name) is params[name]:
            from_registry.append(name)
        else:
            values[name] = funcargs[name]
    if not values:
        return tuple(from_registry), b""
    try:
        return tuple(from_registry), pickle.dumps(values)
    except Exception as together:  # diagnosed below: which fixture, with its own error chained
        failure = together
    for name, value in values.items():  # only on failure: pickle one by one to name the culprit
        try:
            pickle.dumps(value)
        except Exception as exc:
            raise CaseNotRunnable(
                f"fixture {name!r} (a {type(value).__name__}) cannot be sent to the rank processes: {exc}. "
                "Fixtures run in the pytest process and their values are pickled to every rank; return a "
                "picklable value, or build the object inside the case body."
            ) from exc
    raise CaseNotRunnable(
        f"the fixture values {sorted(values)} cannot be pickled together for the ranks: {failure}"
    ) from failure
