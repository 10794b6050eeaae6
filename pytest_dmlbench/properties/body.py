"""How a rank calls a case body: plainly, or in lockstep when it is a Hypothesis ``@given`` test.

Imported by the rank-side execution path; imports neither pytest nor Hypothesis (Hypothesis is used only
when the case module has already loaded it).
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any


def is_property(func: Callable[..., Any]) -> bool:
    hypothesis = sys.modules.get("hypothesis")
    return hypothesis is not None and bool(hypothesis.is_hypothesis_test(func))


def run_case_body(func: Callable[..., Any], kwargs: dict[str, Any], max_examples: int | None = None) -> Any:
    """``func(**kwargs)``; a ``@given`` case runs in lockstep with the other ranks (``max_examples``: at most
    that many examples, its own setting where None; the smoke run's is one)."""
    if is_property(func):
        from pytest_dmlbench.properties.lockstep import run_in_lockstep

        return run_in_lockstep(func, kwargs, max_examples=max_examples)
    return func(**kwargs)


def property_verdict(exc: BaseException) -> dict[str, Any] | None:
    """What a failed case sends to the parent beside its traceback: a property's agreed verdict, if any."""
    verdict = getattr(exc, "dmlbench_property", None)
    return dict(verdict) if isinstance(verdict, dict) else None
