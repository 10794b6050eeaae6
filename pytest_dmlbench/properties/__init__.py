"""Property-based distributed cases: Hypothesis ``@given`` on real process groups, shrinking in lockstep.

All of it runs on ranks and sits below the world engine, which calls :mod:`.body` (dispatch);
:mod:`.lockstep` (the agreed run), :mod:`.channel` (the engine's side channel), :mod:`.database` (rank 0 owns
the example database). The pytest side is :mod:`pytest_dmlbench.items.property_cases`. Public for case authors:
:func:`refute` and :class:`Counterexample` (negative controls).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pytest_dmlbench.properties.lockstep import Counterexample

__all__ = ["Counterexample", "refute"]


def refute(prop: Any, /, **fixtures: Any) -> Counterexample:
    """See :func:`pytest_dmlbench.properties.lockstep.refute` (imported lazily: it needs Hypothesis)."""
    from pytest_dmlbench.properties.lockstep import refute as run

    return run(prop, **fixtures)


def __getattr__(name: str) -> Any:
    if name == "Counterexample":
        from pytest_dmlbench.properties.lockstep import Counterexample

        return Counterexample
    raise AttributeError(name)
