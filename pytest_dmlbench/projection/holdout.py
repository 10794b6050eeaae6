"""The collective model checked on measurements it was not fitted on.

Every measured collective (one per collective, world size and message size; repeated measurements of
the same point are pooled into their median) is predicted twice by :func:`~.collective_model.fit`:

- **message size held out**: fitted on the collective's other message sizes, at every world size;
- **world size held out**: fitted on the collective's other world sizes, at every message size (what a
  projection to more ranks does).

Sizes within 1 % of each other count as one message size: a benchmark rounds a size to a multiple of the
world size (4 KiB is 4092 bytes on 3 ranks), and holding out a size must hold out all of them.

The error of a prediction is ``predicted / measured - 1``; the summary is the median of its magnitude.
A prediction the results cannot support (too few sizes or world sizes left to fit) is ``None``.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal, Protocol

from pytest_dmlbench.projection.collective_model import MODELLED_OPS, FitError, Timing, fit

SAME_SIZE_REL_TOL = 0.01
HeldOutKind = Literal["size", "world_size"]
HELD_OUT_KINDS: tuple[HeldOutKind, ...] = ("size", "world_size")


class Predictor(Protocol):
    def predict(self, nbytes: float, p: int) -> float: ...


Fitter = Callable[[str, list[Timing]], Predictor]


@dataclass(frozen=True)
class HeldOut:
    """One measured collective and its predictions by fits that did not see its size or its world size."""

    op: str
    world_size: int
    nbytes: float
    measured_s: float
    size_out_s: float | None
    world_size_out_s: float | None

    def error(self, kind: HeldOutKind) -> float | None:
        """``predicted / measured - 1`` with ``kind`` held out, ``None`` where it could not be predicted."""
        predicted = self.size_out_s if kind == "size" else self.world_size_out_s
        return None if predicted is None else predicted / self.measured_s - 1.0


def pooled(timings: Sequence[Timing]) -> list[Timing]:
    """One timing per collective, world size and size (the median of repeats), sorted; one-rank and empty
    points are left out (they carry no network cost)."""
    groups: dict[tuple[str, int, float], list[float]] = {}
    for t in timings:
        if t.op in MODELLED_OPS and t.world_size > 1 and t.nbytes > 0 and t.seconds > 0:
            groups.setdefault((t.op, t.world_size, t.nbytes), []).append(t.seconds)
    return [Timing(op, p, n, statistics.median(s)) for (op, p, n), s in sorted(groups.items())]


def _predict(fitter: Fitter, op: str, training: list[Timing], point: Timing) -> float | None:
    try:
        return fitter(op, training).predict(point.nbytes, point.world_size)
    except FitError:
        return None


def held_out(timings: Sequence[Timing], fitter: Fitter = fit) -> list[HeldOut]:
    """Every pooled point predicted with its message size and, separately, its world size held out."""
    points = pooled(timings)
    rows = []
    for point in points:
        same_op = [t for t in points if t.op == point.op]
        other_sizes = [t for t in same_op if not math.isclose(t.nbytes, point.nbytes, rel_tol=SAME_SIZE_REL_TOL)]
        other_worlds = [t for t in same_op if t.world_size != point.world_size]
        rows.append(HeldOut(point.op, point.world_size, point.nbytes, point.seconds,
                            _predict(fitter, point.op, other_sizes, point),
                            _predict(fitter, point.op, other_worlds, point) if other_worlds else None))
    return rows


def median_error(rows: Sequence[HeldOut], kind: HeldOutKind, op: str | None = None) -> float | None:
    """Median ``|predicted / measured - 1|`` over the rows (of ``op``) with ``kind`` held out."""
    errors = [abs(e) for r in rows if op is None or r.op == op if (e := r.error(kind)) is not None]
    return statistics.median(errors) if errors else None


def why_not(rows: Sequence[HeldOut], kind: HeldOutKind) -> str | None:
    """Why no row has a prediction with ``kind`` held out; ``None`` when some have."""
    if any(r.error(kind) is not None for r in rows):
        return None
    if not rows:
        return "the results hold no collective cases on more than one rank"
    if kind == "size":
        return "no collective was measured at enough message sizes to fit without one of them (three or more)"
    worlds = ", ".join(str(p) for p in sorted({r.world_size for r in rows}))
    return (f"every collective was measured at one world size ({worlds}); record them at two or more, e.g. "
            "`--world-size 2`, `3` and `4` runs of bench_cases/test_collectives.py")
