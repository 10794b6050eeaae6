"""Warnings raised on rank processes, brought back to pytest's warnings summary.

The parent sends the warning filters in force for the item (pytest's ``-W``, ``filterwarnings`` ini lines
and marks, all applied around the call) with the case; a rank runs the body under exactly those filters, so
``-W error`` turns a rank's warning into that rank's failure as it would in-process, and records the
warnings the filters let through. The parent re-raises each distinct one once, naming the ranks, inside the
item's call, where pytest collects it. No pytest import: this runs on ranks too.
"""

from __future__ import annotations

import pickle
import re
import warnings
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Literal

from pytest_dmlbench.world.rank_names import rank_list

Action = Literal["default", "error", "ignore", "always", "all", "module", "once"]
ACTIONS: tuple[Action, ...] = ("default", "error", "ignore", "always", "all", "module", "once")

# One warning filter as ``warnings.filterwarnings`` takes it: action, message regex, category, module regex,
# line number (0: any).
Filter = tuple[Action, str, type[Warning], str, int]


@dataclass(frozen=True)
class RankWarning:
    """A warning one rank recorded: its text, class and where it was raised."""

    message: str
    category: type[Warning]
    filename: str
    lineno: int


def filters_in_force() -> tuple[Filter, ...]:
    """The filters in force now, in order, those whose category cannot be sent (a class defined inside a
    function) or whose action Python does not know left out."""
    kept: list[Filter] = []
    for action, message, category, module, lineno in warnings.filters:
        known = next((a for a in ACTIONS if a == action), None)
        if known is None or not isinstance(category, type) or not _sendable(category):
            continue
        kept.append((known, _pattern(message), category, _pattern(module), int(lineno)))
    return tuple(kept)


def _pattern(compiled: re.Pattern[str] | str | None) -> str:
    """A filter's regex as ``filterwarnings`` takes it; a plain string (Python's own default filters hold
    ``'__main__'``) matches exactly."""
    if compiled is None:
        return ""
    return re.escape(compiled) + r"\Z" if isinstance(compiled, str) else compiled.pattern


def _sendable(category: type[Warning]) -> bool:
    try:
        pickle.dumps(category)
    except (pickle.PicklingError, AttributeError, TypeError):
        return False
    return True


@contextmanager
def recorded(filters: Iterable[Filter]) -> Iterator[list[RankWarning]]:
    """Run the block under ``filters`` (an ``error`` action raises at the warning); yields the list the
    warnings shown under them are recorded in."""
    caught: list[RankWarning] = []
    with warnings.catch_warnings(record=True) as log:
        warnings.resetwarnings()
        for action, message, category, module, lineno in filters:
            warnings.filterwarnings(action, message, category, module, lineno, append=True)
        try:
            yield caught
        finally:
            caught.extend(_rank_warning(entry) for entry in log)


def _rank_warning(entry: warnings.WarningMessage) -> RankWarning:
    category: type[Warning] = entry.category
    text = str(entry.message)
    if not _sendable(category):
        text, category = f"{category.__qualname__}: {text}", UserWarning
    return RankWarning(text, category, str(entry.filename), int(entry.lineno))


def raise_in_parent(per_rank: Iterable[tuple[int, Iterable[RankWarning]]]) -> None:
    """Warn once per distinct warning the ranks recorded, naming the ranks; an ``error`` filter in force
    raises the first."""
    ranks: dict[RankWarning, list[int]] = {}
    for rank, recorded_warnings in per_rank:
        for warning in recorded_warnings:
            ranks.setdefault(warning, []).append(rank)
    for warning, on in ranks.items():
        names = f"rank {on[0]}" if len(on) == 1 else "ranks " + rank_list(on)
        warnings.warn_explicit(_message(warning.category, f"{warning.message} [on {names}]"), warning.category,
                               warning.filename, warning.lineno)


def _message(category: type[Warning], text: str) -> Warning:
    """The rank's class made from the text; a ``UserWarning`` naming it when the class takes other arguments."""
    try:
        return category(text)
    except TypeError:
        return UserWarning(f"{category.__qualname__}: {text}")

