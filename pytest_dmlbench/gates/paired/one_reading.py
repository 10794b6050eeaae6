"""Figures that are one reading: a case's tested figures whose block pairs say exactly the same thing.

``busbw_gbps`` is a fixed multiple of ``algbw_gbps``, which is bytes over ``step_time_s``; an experiment's
``throughput_samples_per_s`` is samples over ``epoch_time_s``. Per block each is a function of one timing,
so their pair values (A against B in the bad direction, :func:`~.statistics.pair_values`) agree in every
pair and their paired tests are one test. The run-level rule (:mod:`pytest_dmlbench.gates.run_level`)
splits alpha over a case's distinct tests, so such figures count once: the first figure of a group (its
*representative*, in the case's order) is the test, and another member may fail only where the
representative failed with it and the two still agree in every pair of the deciding stage.

The groups are found on the first stage's pairs, which the confirmation does not reuse, so the split is
fixed before the confirmation's pairs are drawn; the union bound then holds exactly, since a member's red
is contained in its representative's.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

TOLERANCE = 1e-9  # on pair values (log ratios or differences): float rounding, never measurement noise


def same_reading(x: Sequence[float], y: Sequence[float]) -> bool:
    """Whether two figures' pair values agree in every pair, over at least two pairs that vary: a figure
    whose pairs all read alike (an accuracy that never moves) carries no sign of being one reading with
    another, so it is never grouped."""
    if len(x) != len(y) or len(x) < 2:
        return False
    if max(x) - min(x) <= TOLERANCE or max(y) - min(y) <= TOLERANCE:
        return False
    return all(abs(p - q) <= TOLERANCE * max(1.0, abs(p)) for p, q in zip(x, y, strict=True))


def one_reading_groups(order: Sequence[str], values: Mapping[str, Sequence[float]]) -> list[list[str]]:
    """The figures of ``order`` grouped by :func:`same_reading` of their pair ``values`` (a figure without
    usable values is a group of its own); each group's first name is its representative."""
    groups: list[list[str]] = []
    for name in order:
        own = values.get(name)
        home = next((g for g in groups if own is not None and g[0] in values and same_reading(values[g[0]], own)),
                    None)
        if home is None:
            groups.append([name])
        else:
            home.append(name)
    return groups
