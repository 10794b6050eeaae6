"""``aggregate`` and ``attack``: name-based entry points with validation of names, shapes and params."""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Sequence
from typing import Any

from torch import Tensor

from pytest_dmlbench.robust import aggregators, attacks, clipping, distance
from pytest_dmlbench.robust._checks import check_f, check_updates
from pytest_dmlbench.robust.pre import PRE_AGGREGATIONS, PreSpec, parse_pre

AGGREGATORS: dict[str, Callable[..., Tensor]] = {
    "mean": aggregators.mean,
    "median": aggregators.median,
    "trimmed_mean": aggregators.trimmed_mean,
    "meamed": aggregators.meamed,
    "krum": distance.krum,
    "multi_krum": distance.multi_krum,
    "bulyan": distance.bulyan,
    "geometric_median": distance.geometric_median,
    "centered_clipping": clipping.centered_clipping,
}

ATTACKS: dict[str, Callable[..., Tensor]] = {
    name: getattr(attacks, name)
    for name in ("zero", "sign_flip", "ipm", "alie", "mean_shift", "gaussian", "mimic", "inf", "nan")
}


@functools.cache
def _accepted_params(fn: Callable[..., Tensor]) -> tuple[str, ...]:
    return tuple(p for p in inspect.signature(fn).parameters if p not in ("x", "honest", "f"))


def _check_params(kind: str, name: str, fn: Callable[..., Tensor], params: dict[str, Any]) -> None:
    if not params:
        return
    accepted = _accepted_params(fn)
    unknown = sorted(set(params) - set(accepted))
    if unknown:
        raise TypeError(f"{kind} {name!r} does not take {', '.join(unknown)}; "
                        f"it accepts: {', '.join(accepted) or 'no parameters'}")


def _lookup(kind: str, table: dict[str, Callable[..., Tensor]], name: str) -> Callable[..., Tensor]:
    if name not in table:
        raise ValueError(f"unknown {kind} {name!r}; valid names: {', '.join(table)}")
    return table[name]


def aggregate(
    name: str, updates: Tensor, *, f: int, pre: PreSpec | Sequence[PreSpec] | None = None, **params: Any
) -> Tensor:
    """Aggregate the ``(n, d)`` rows of ``updates`` with rule ``name`` tolerating f Byzantine rows.

    ``pre`` names pre-aggregations applied first (see the package docstring). Returns a new ``(d,)``
    tensor of the input dtype; ``updates`` is never modified.
    """
    rule = _lookup("aggregator", AGGREGATORS, name)
    x = check_updates(updates, name)
    check_f(f, x.shape[0], name)
    _check_params("aggregator", name, rule, params)
    steps = parse_pre(pre)
    for step, step_params in steps:
        fn = PRE_AGGREGATIONS[step]
        _check_params("pre-aggregation", step, fn, step_params)
        x = fn(x, f=f, **step_params)
    try:
        return rule(x, f=f, **params)
    except ValueError as error:
        if not steps:
            raise
        chain = " -> ".join(step for step, _ in steps)
        raise ValueError(f"{error} (after pre-aggregation {chain}: {updates.shape[0]} inputs became "
                         f"{x.shape[0]} rows)") from error


def attack(name: str, honest: Tensor, *, f: int, **params: Any) -> Tensor:
    """The ``(f, d)`` rows the f Byzantine ranks send under attack ``name``, given the honest rows."""
    fn = _lookup("attack", ATTACKS, name)
    rows = check_updates(honest, name)
    if isinstance(f, bool) or not isinstance(f, int) or f < 0:
        raise ValueError(f"attack {name!r}: f must be a non-negative int, got {f!r}")
    _check_params("attack", name, fn, params)
    return fn(rows, f=f, **params)
