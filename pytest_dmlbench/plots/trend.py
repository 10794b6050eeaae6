"""Trends of each judged metric over runs, against the commit and date of each run, with the threshold band.

Points of a case's metric, oldest first: the medians of earlier saved runs a baseline file keeps
(``history``, which records no commit: shown as ``save -k``; kept for cases of the first file given), then
the median of every results file given, in order, labelled with the run's commit (``run.commit``) and
creation time. Each line is divided by its reference, the median its latest point was compared with (the
verdict's baseline, else the point before), so cases of different scales share one axis; the band is the
verdict threshold around it and the y range always shows twice the band, so a wobble well inside the
threshold looks small. Markers carry the verdict recorded with that point. The figure shows the cases with
a regression or improvement first, then those that moved most.

A point judged in a paired run (``--dmlbench-against REF``) was compared with REF re-measured in the same
run, not with the stored baselines the line's earlier points come from: REF's median is drawn apart, as
a hollow diamond of the case's colour at that run's position, in a series of its own in the legend, and
the caption says which reference each line is divided by.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from pytest_dmlbench.plots.figure import MAX_SERIES, Figure, Skipped, new_axes, save
from pytest_dmlbench.plots.series import labelled
from pytest_dmlbench.results import CHANGE_KINDS, RunResults

TREND_METRICS = ("throughput_samples_per_s", "step_time_s", "busbw_gbps", "exposed_comm_fraction", "peak_rss_mb",
                 "accuracy")
"""Metrics that always get a trend figure; any other gets one only where some case was judged on it."""
MARKERS = {"regression": ("v", "tab:red"), "improvement": ("^", "tab:green"),
           "unchanged": ("o", "tab:gray"), "new": ("s", "tab:blue"), "inconclusive": ("x", "tab:orange")}


@dataclass
class Trend:
    """One case's metric over runs: medians and the verdict at each point (None: not compared)."""

    label: str
    metric: str
    values: list[float] = field(default_factory=list)
    verdicts: list[str | None] = field(default_factory=list)
    positions: list[int] = field(default_factory=list)
    """x of each point: the run's index among the files given; earlier saves of a baseline count down
    from the first run that carries them (-1, -2, ...)."""
    threshold_pct: float | None = None
    baseline: float | None = None
    """The median the latest point was compared with (its verdict's baseline), when it was compared."""
    ref_points: list[tuple[int, float]] = field(default_factory=list)
    """(x, REF's median) where a point was judged against REF in a paired run: a series apart from the line."""

    def add(self, value: float, verdict: str | None, position: int) -> None:
        self.values.append(value)
        self.verdicts.append(verdict)
        self.positions.append(position)

    @property
    def reference(self) -> float:
        """What the line is divided by: the latest point's baseline, else the point before it."""
        if self.baseline:
            return self.baseline
        return self.values[-2] if len(self.values) >= 2 else self.values[0]

    @property
    def relative(self) -> list[float]:
        return [v / self.reference for v in self.values]

    @property
    def judged(self) -> bool:
        return any(v in CHANGE_KINDS for v in self.verdicts)

    @property
    def movement(self) -> float:
        return max(abs(v - 1.0) for v in self.relative) if self.reference else 0.0


def run_label(run: RunResults, position: int) -> str:
    """A run's tick label: its short commit and its creation time (UTC), as far as the file records them."""
    commit = str(run.run.get("commit") or "")[:7]
    when = ""
    if run.created:
        try:
            when = datetime.fromisoformat(run.created).strftime("%Y-%m-%d %H:%M")
        except ValueError:
            when = run.created
    return "\n".join(part for part in (commit, when) if part) or f"run {position + 1}"


def tick_labels(runs: Sequence[RunResults], positions: Sequence[int]) -> dict[int, str]:
    """x position -> label: ``save -k`` for a baseline's earlier saves, the run's commit and date otherwise."""
    return {p: (f"save {p}" if p < 0 else run_label(runs[p], p)) for p in sorted(set(positions))}


def trends(runs: Sequence[RunResults]) -> dict[str, list[Trend]]:
    """metric -> trends of every case with at least two points for a metric with a better direction."""
    found: dict[tuple[str, str], Trend] = {}
    for position, run in enumerate(runs):
        default_threshold = run.run.get("threshold_pct")
        for case in run.cases:
            verdicts = {v.metric: v for v in case.verdicts}
            for name, metric in case.metrics.items():
                if metric.better is None:
                    continue
                key = (case.nodeid, name)
                trend = found.get(key)
                if trend is None:
                    trend = found[key] = Trend(labelled(case), name)
                    # earlier saves sit before the first run; a case first seen later keeps only its runs
                    for index, earlier in enumerate(metric.history if position == 0 else []):
                        trend.add(earlier, None, position - len(metric.history) + index)
                median = metric.stats.median
                if median == median:
                    verdict = verdicts.get(name)
                    trend.add(median, verdict.kind if verdict else None, position)
                    trend.baseline = verdict.baseline_median if verdict else None
                    if verdict is not None and verdict.paired is not None and verdict.baseline_median:
                        trend.ref_points.append((position, verdict.baseline_median))
                    threshold = verdict.threshold_pct if verdict else (case.threshold_pct or default_threshold)
                    trend.threshold_pct = float(threshold) if threshold else trend.threshold_pct
    by_metric: dict[str, list[Trend]] = {}
    for trend in found.values():
        if len(trend.values) >= 2 and trend.reference:
            by_metric.setdefault(trend.metric, []).append(trend)
    return {name: found_trends for name, found_trends in sorted(by_metric.items())
            if name in TREND_METRICS or any(t.judged for t in found_trends)}


def shown_trends(all_trends: Sequence[Trend]) -> list[Trend]:
    """Judged cases first, then those that moved most; cases that did not move at all are left out
    (unless nothing moved)."""
    moved = [t for t in all_trends if t.judged or t.movement > 0] or list(all_trends)
    return sorted(moved, key=lambda t: (not t.judged, -t.movement))[:MAX_SERIES]


def draw(runs: Sequence[RunResults], out: Path) -> list[Figure] | Skipped:
    by_metric = trends(runs)
    if not by_metric:
        return Skipped("trend", "a trend needs two or more points: pass several results files, or a "
                                "baseline saved several times (its history)")
    figures = []
    for metric, all_trends in by_metric.items():
        shown = shown_trends(all_trends)
        title = f"Trend of {metric}"
        fig, ax = new_axes(title, "run (commit, date UTC; oldest first)", f"{metric} / reference")
        ref_label = "REF, re-measured in the paired run (not a stored baseline)"
        for trend in shown:
            (line,) = ax.plot(trend.positions, trend.relative, label=trend.label)
            for x, y, verdict in zip(trend.positions, trend.relative, trend.verdicts, strict=True):
                marker, color = MARKERS.get(verdict or "", (".", line.get_color()))
                ax.plot([x], [y], marker=marker, color=color, markersize=9 if verdict else 5, linestyle="none")
            for x, ref in trend.ref_points:
                ax.plot([x], [ref / trend.reference], marker="D", markersize=8, fillstyle="none", linestyle="none",
                        color=line.get_color(), label=ref_label)
                ref_label = "_nolegend_"  # one legend entry for the series
        ax.axhline(1.0, color="black", linewidth=0.8)
        thresholds = sorted({t.threshold_pct for t in shown if t.threshold_pct})
        threshold_band(ax, thresholds, [y for t in shown for y in t.relative])
        ticks = tick_labels(runs, [p for t in shown for p in t.positions])
        ax.set_xticks(list(ticks), list(ticks.values()), fontsize="x-small")
        ax.legend(fontsize="x-small")
        paired = any(t.ref_points for t in shown)
        reference = ("the median its latest point was compared with: REF's for a paired verdict (hollow "
                     "diamonds: REF re-measured in that run, apart from the stored baselines of the line's "
                     "earlier points), the stored baseline's otherwise" if paired
                     else "the median its latest point was compared with")
        band = (f"shaded: the verdict threshold ({', '.join(f'{t:g} %' for t in thresholds)}) around the "
                "reference; " if thresholds else "no threshold recorded, so no band; ")
        caption = (f"{len(shown)} of {len(all_trends)} cases (judged ones first, then the largest moves; "
                   f"unmoved ones left out); each line divided by its reference, {reference}; "
                   f"{band}x: each run's commit and date (save -k: earlier saves of a "
                   "baseline); markers: red down = regression, green up = improvement, grey = unchanged, "
                   "blue = new")
        figures.append(save(fig, out / f"trend-{metric}.png", title, caption))
    return figures


def threshold_band(ax: Any, thresholds: Sequence[float], ys: Sequence[float]) -> None:
    """Shade 1 +/- each threshold and set the y range to at least twice the widest band around 1 (10 % when
    none is known), widened to every point: a change well inside the threshold stays visibly small."""
    for threshold in thresholds:
        ax.axhspan(1 - threshold / 100, 1 + threshold / 100, color="tab:gray", alpha=0.15, linewidth=0,
                   label=f"±{threshold:g} % threshold")
    half = 2 * max(thresholds, default=10.0) / 100
    low, high = min([1 - half, *ys]), max([1 + half, *ys])
    margin = (high - low) * 0.05
    ax.set_ylim(low - margin, high + margin)
