"""The step detector run over every case-metric of a nightly history."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from pytest_dmlbench.drift.detect import DriftSettings, Finding, detect
from pytest_dmlbench.drift.history import Key, Night, series

DEFAULT_WINDOW = 60  # nights judged: the newest ones (the fit is cubic in the series' length)


@dataclass(frozen=True)
class SeriesFinding:
    """A finding of one case-metric, with the nights on either side of it."""

    case: str
    metric: str
    finding: Finding
    before: Night  # the last night at the old level
    after: Night  # the first night at the new level
    noise: float

    @property
    def commits(self) -> str:
        """The commit range to read (``git log OLD..NEW``)."""
        return f"{self.before.commit[:12] or '?'}..{self.after.commit[:12] or '?'}"


@dataclass(frozen=True)
class DriftReport:
    """What the detector found in a history."""

    nights: tuple[Night, ...]  # the nights judged: the newest window on the newest night's machine
    other_machine: int  # nights of the window left out: measured on another machine
    judged: int  # case-metrics with enough nights
    too_short: int  # case-metrics with fewer than settings.min_nights nights
    findings: tuple[SeriesFinding, ...]
    settings: DriftSettings

    @property
    def regressions(self) -> tuple[SeriesFinding, ...]:
        return tuple(f for f in self.findings if f.finding.regression)


def analyse(nights: Sequence[Night], settings: DriftSettings | None = None,
            window: int = DEFAULT_WINDOW) -> DriftReport:
    """Run the detector over the newest ``window`` nights of every case-metric in ``nights`` (oldest first)
    that ran on the newest night's machine (medians of different machines differ by the machine)."""
    settings = settings or DriftSettings()
    window_nights = tuple(nights[-window:]) if window > 0 else tuple(nights)
    machine = window_nights[-1].machine if window_nights else ""
    recent = tuple(night for night in window_nights if night.machine == machine)
    keys: set[Key] = {key for night in recent for key in night.points}
    judged = too_short = 0
    findings: list[SeriesFinding] = []
    for key in sorted(keys):
        points = series(recent, key)
        detection = detect([p.median for _, p in points], points[-1][1].better, settings)
        if not detection.judged:
            too_short += 1
            continue
        judged += 1
        findings += [SeriesFinding(key[0], key[1], f, points[f.before][0], points[f.after][0], detection.noise)
                     for f in detection.findings]
    order = {"regression": 0, "creep": 1, "step": 2, "improvement": 3}
    findings.sort(key=lambda f: (order[f.finding.kind], -abs(f.finding.change - 1.0)))
    return DriftReport(recent, len(window_nights) - len(recent), judged, too_short, tuple(findings), settings)
