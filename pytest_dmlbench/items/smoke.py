"""``--dmlbench-smoke``: which parametrized cases run, so that every code path runs once and quickly.

A test function's cases form a grid of parameter values. The smoke run keeps a covering subset of it: every
value of every parameter appears in at least one kept case (strategies, aggregators, operations: each a code
path), chosen greedily, the case that covers most values not yet covered first, ties to the earliest. A
parameter the case names as a sweep with ``@pytest.mark.dmlbench_smoke("size", "model_name")`` (sizes,
batch sizes, models: the same code at another scale) keeps only its first value, the smallest by the
convention that sweeps list it first. Combinations of values are not all run: the full run does that.
Code that imports this module does not import pytest.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from typing import Any

SMOKE_MARKER = "dmlbench_smoke"
SMOKE_MARKER_DOC = (f"{SMOKE_MARKER}(*sweeps): under --dmlbench-smoke, run only the first value (the smallest) of "
                    "each named parameter; every value of the others runs at least once")


def covering(rows: Sequence[Mapping[str, str]], sweeps: Collection[str] = ()) -> list[int]:
    """Indices of the rows (each a parameter name -> value key) the smoke run keeps: the rows that hold the
    first row's value of every parameter in ``sweeps``, then of those a greedy cover of every value of
    every other parameter; in the rows' order."""
    if not rows:
        return []
    first = rows[0]
    candidates = [i for i, row in enumerate(rows) if all(row.get(name) == first.get(name) for name in sweeps)]
    missing = {(name, value) for i in candidates for name, value in rows[i].items()}
    kept: list[int] = []
    while missing:
        best = max(candidates, key=lambda i: (len(missing & set(rows[i].items())), -i))
        kept.append(best)
        missing -= set(rows[best].items())
    return sorted(kept)


def _key(value: object) -> str:
    return repr(value)


def smoke_items(items: Sequence[Any]) -> tuple[list[Any], list[Any]]:
    """(kept, left out) of pytest's collected ``items`` for a smoke run: each test function's distributed cases
    (marked ``dmlbench`` or ``dmlbench_smoke``) reduced by :func:`covering`; other items all kept."""
    groups: dict[tuple[str, str], list[int]] = {}
    for index, item in enumerate(items):
        getter = getattr(item, "get_closest_marker", None)
        if getattr(item, "callspec", None) is None or getter is None:
            continue
        if getter("dmlbench") is None and getter(SMOKE_MARKER) is None:
            continue
        name = str(getattr(item, "originalname", getattr(item, "name", "")))
        groups.setdefault((str(getattr(item, "path", "")), name), []).append(index)
    dropped: set[int] = set()
    for members in groups.values():
        marker = items[members[0]].get_closest_marker(SMOKE_MARKER)
        sweeps = tuple(str(arg) for arg in marker.args) if marker is not None else ()
        rows = [{name: _key(value) for name, value in items[i].callspec.params.items()} for i in members]
        kept = {members[i] for i in covering(rows, sweeps)}
        dropped |= set(members) - kept
    return ([item for i, item in enumerate(items) if i not in dropped],
            [item for i, item in enumerate(items) if i in dropped])
