"""How much of a run its verdicts settled: judged figures found changed or proven unchanged, against the rest.

A judged figure (any verdict but ``new``) is *settled* when it is a regression, an improvement or proven
``unchanged``; otherwise it is inconclusive, tested but not settled or not testable. The summary, the table,
the JSON (``run.settled``), the job summary and the report give these counts, and per figure (metric name) where
a run holds at least :data:`MIN_PER_FIGURE` judged verdicts of it.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import asdict, dataclass
from typing import Any

from pytest_dmlbench.results import RunResults, Verdict

SETTLED_KINDS = frozenset({"regression", "improvement", "unchanged"})
MIN_PER_FIGURE = 20


@dataclass(frozen=True)
class Settled:
    """Counts of judged figures: settled, tested and not settled, untestable."""

    judged: int = 0
    settled: int = 0
    unsettled: int = 0
    untestable: int = 0

    @classmethod
    def of(cls, verdicts: Iterable[Verdict]) -> Settled:
        judged = [v for v in verdicts if v.kind != "new"]
        causes = [v.inconclusive_cause for v in judged]
        return cls(len(judged), sum(v.kind in SETTLED_KINDS for v in judged), causes.count("unsettled"),
                   causes.count("untestable"))


def by_figure(results: RunResults) -> dict[str, Settled]:
    """Per figure with at least :data:`MIN_PER_FIGURE` judged verdicts in the run, its counts."""
    verdicts = [v for case in results.cases for v in case.verdicts]
    names = sorted({v.metric for v in verdicts})
    counts = {n: Settled.of(v for v in verdicts if v.metric == n) for n in names}
    return {n: c for n, c in counts.items() if c.judged >= MIN_PER_FIGURE}


def settled_text(results: RunResults) -> str:
    """``settled: 40 of 52 judged figures; not settled: 10 tested, 2 untestable; per figure: step_time_s 30 of
    32, ...`` (empty when nothing was judged)."""
    total = Settled.of(v for case in results.cases for v in case.verdicts)
    if not total.judged:
        return ""
    text = (f"settled: {total.settled} of {total.judged} judged figure(s) (found changed, or proven unchanged "
            f"within the threshold); not settled: {total.unsettled} tested, {total.untestable} untestable")
    figures = by_figure(results)
    if figures:
        text += "; per figure: " + ", ".join(f"{n} {c.settled} of {c.judged}" for n, c in figures.items())
    return text


def settled_record(results: RunResults) -> dict[str, Any]:
    """The counts as the results JSON keeps them (``run.settled``): the run's, and per figure where shown."""
    total = Settled.of(v for case in results.cases for v in case.verdicts)
    return {**asdict(total), "per_figure": {n: asdict(c) for n, c in by_figure(results).items()}}
