"""``matrix:``: lists of values whose every combination becomes one experiment (one test item).

``{strategy: [ddp, ps], world_size: [2, 4]}`` expands to four combinations, in the order the keys and
values are written; each has an id showing its values, ``strategy=ddp-world_size=2``.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping
from typing import Any

from pytest_dmlbench.experiments.fields import FIELDS
from pytest_dmlbench.experiments.schema import FieldProblem

NOT_EXPANDABLE = ("name",)


def format_value(value: Any) -> str:
    """A value as it appears in an id: ``ddp``, ``0.01``, ``true``, ``bucketed(bucket_mb=1)``."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, Mapping):
        name = value.get("name")
        options = value.get("options") if name is not None else value
        inner = ",".join(f"{k}={format_value(v)}" for k, v in dict(options or {}).items())
        return f"{name}({inner})" if name is not None else f"({inner})"
    if isinstance(value, (list, tuple)):
        return "(" + ",".join(format_value(v) for v in value) + ")"
    return str(value)


def expand(matrix: Any) -> list[tuple[str, dict[str, Any]]]:
    """Every combination of ``matrix`` as ``(id, {key: value})``; raises :class:`FieldProblem`."""
    expandable = ", ".join(k for k in FIELDS if k not in NOT_EXPANDABLE)
    if not isinstance(matrix, Mapping) or not matrix:
        raise FieldProblem("matrix", f"{matrix!r} is not a mapping of fields to lists of values",
                           f"a non-empty mapping whose keys are fields ({expandable})")
    keys = [str(k) for k in matrix]
    for key in keys:
        if key not in FIELDS or key in NOT_EXPANDABLE:
            raise FieldProblem(f"matrix.{key}", "is not a field that can vary", expandable)
        values = matrix[key]
        if not isinstance(values, list):
            raise FieldProblem(f"matrix.{key}", f"{values!r} is not a list of values",
                               f"a non-empty list, e.g. {key}: [a, b]")
        if not values:
            raise FieldProblem(f"matrix.{key}", "is an empty list: the matrix expands to nothing",
                               f"a non-empty list, e.g. {key}: [a, b]")
    combinations = []
    for chosen in itertools.product(*(matrix[k] for k in keys)):
        combination = dict(zip(keys, chosen, strict=True))
        ident = "-".join(f"{k}={format_value(v)}" for k, v in combination.items())
        combinations.append((ident, combination))
    return combinations
