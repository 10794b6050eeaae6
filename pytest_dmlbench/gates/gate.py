"""The gate interface: what the plugin hands a gate for each finished item, and what it gets back.

A gate decides verdicts; it never mutates the case result (the plugin assigns what the gate returns) and
never imports the plugin. The stored gate (:mod:`.stored`) and the paired gate (:mod:`.paired`) implement
it; the plugin calls :meth:`Gate.judge` at one point for every item that recorded figures, dmlbench cases
and in-process figures alike.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from pytest_dmlbench.measure.rounds import BlockBudget
from pytest_dmlbench.results import CaseResult, Verdict


@dataclass
class BlockResult:
    """What one block of a case measured: per metric its unit, direction and per-round samples (rank 0's,
    which are rank-agreed, and peak memory maxed over ranks); or why it did not pass."""

    status: str  # passed, failed, skipped
    metrics: dict[str, dict[str, Any]] = field(default_factory=dict)
    message: str = ""
    elapsed_s: float = 0.0
    profile: dict[str, Any] | None = None  # rank 0's ``BlockProfile.to_dict`` for a profiled block


@dataclass(frozen=True)
class JudgedItem:
    """The item a gate judges, as the gate needs it: where it lives and how it ran.

    ``in_process``: its figures were recorded in the pytest process (a block calls it whole); ``run_options``
    are the command-line options that reproduce this item's run (world size, backend, launcher, isolation,
    ...), for the commands verdicts print. The paired gate re-measures an item in block servers, never in
    the session that ran it (:func:`pytest_dmlbench.gates.paired.launch.own_launch`).
    """

    nodeid: str
    path: Path
    timeout_s: float
    run_options: tuple[str, ...] = ()
    in_process: bool = False
    pair_budget_s: float | None = None  # the case's own budget of block pairs (marker or experiment field)
    scaling_family: str | None = None  # a ``scaling=True`` variant: its family (same function and parameters)
    scaling_world_size: int = 0  # ... and its world size in that family


@dataclass
class GateDecision:
    """A gate's answer for one item: its verdicts, what to record with the result, and a problem that
    fails the item on its own (an unreadable baseline, a block that failed, REF gone)."""

    verdicts: list[Verdict] = field(default_factory=list)
    extra: dict[str, Any] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    problem: str | None = None


class Gate(Protocol):
    """Judges finished items; one per pytest process, chosen at configure time."""

    def collected(self, items: Sequence[tuple[str, Path]], measuring: int) -> None:
        """The run's cases (node id, file), after collection and before the engine starts its worlds;
        ``measuring`` of them use a fixture that records figures (the cases the run-level rule counts)."""

    def ready(self) -> None:
        """After the engine started its worlds, before the first case runs."""

    def case_budget(self) -> BlockBudget | None:
        """The rounds a case's own run measures (``None``: each measurement's default): the figures this gate
        judges come from them, or, for a gate that measures its own, they only check the case."""

    def judge(self, item: JudgedItem, result: CaseResult) -> GateDecision:
        """The verdicts on ``result``'s figures (``result`` is read, not changed)."""

    def summary_lines(self) -> list[str]:
        """Lines for the terminal's summary section of this gate (empty: no section)."""

    def finishing(self) -> None:
        """The run's cases are done: begin releasing what is slow to release (REF's process ending its
        session), so that it overlaps the run's own reporting; :meth:`close` completes it."""

    def close(self) -> None:
        """Release what the gate holds (REF's process); called once at the end of the run."""
