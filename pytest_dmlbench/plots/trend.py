"""Trends of each judged metric over runs, with the verdicts marked.

Points of a case's metric, oldest first: the medians of earlier saved runs a baseline file keeps
(``history``), then the median of every results file given, in order. Each line is divided by its first
point, so cases of different scales share one axis. Markers carry the verdict recorded with that point.
The figure shows the cases with a regression or improvement first, then those that moved most.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

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

    def add(self, value: float, verdict: str | None) -> None:
        self.values.append(value)
        self.verdicts.append(verdict)

    @property
    def judged(self) -> bool:
        return any(v in CHANGE_KINDS for v in self.verdicts)

    @property
    def movement(self) -> float:
        first = self.values[0]
        return max(abs(v / first - 1.0) for v in self.values) if first else 0.0


def trends(runs: Sequence[RunResults]) -> dict[str, list[Trend]]:
    """metric -> trends of every case with at least two points for a metric with a better direction."""
    found: dict[tuple[str, str], Trend] = {}
    for run in runs:
        for case in run.cases:
            verdicts = {v.metric: v.kind for v in case.verdicts}
            for name, metric in case.metrics.items():
                if metric.better is None:
                    continue
                key = (case.nodeid, name)
                trend = found.get(key)
                if trend is None:
                    trend = found[key] = Trend(labelled(case), name)
                    for earlier in metric.history:
                        trend.add(earlier, None)
                median = metric.stats.median
                if median == median:
                    trend.add(median, verdicts.get(name))
    by_metric: dict[str, list[Trend]] = {}
    for trend in found.values():
        if len(trend.values) >= 2 and trend.values[0]:
            by_metric.setdefault(trend.metric, []).append(trend)
    return {name: found_trends for name, found_trends in sorted(by_metric.items())
            if name in TREND_METRICS or any(t.judged for t in found_trends)}


def shown_trends(all_trends: Sequence[Trend]) -> list[Trend]:
    """Judged cases first, then those that moved most; cases that did not move at all are left out
    (unless nothing moved)."""
    moved = [t for t in all_trends if t.judged or t.movement > 0] or list(all_trends)
    return sorted(moved, key=lambda t: (not t.judged, -t.movement))[:MAX_SERIES]


def draw(runs: Sequence[RunResults], out: Path) -> list[Figure] | Skipped:
    from matplotlib.ticker import MaxNLocator

    by_metric = trends(runs)
    if not by_metric:
        return Skipped("trend", "a trend needs two or more points: pass several results files, or a "
                                "baseline saved several times (its history)")
    figures = []
    for metric, all_trends in by_metric.items():
        shown = shown_trends(all_trends)
        title = f"Trend of {metric}"
        fig, ax = new_axes(title, "run (oldest first)", f"{metric} / first point")
        for trend in shown:
            xs = list(range(1, len(trend.values) + 1))
            ys = [v / trend.values[0] for v in trend.values]
            (line,) = ax.plot(xs, ys, label=trend.label)
            for x, y, verdict in zip(xs, ys, trend.verdicts, strict=True):
                marker, color = MARKERS.get(verdict or "", (".", line.get_color()))
                ax.plot([x], [y], marker=marker, color=color, markersize=9 if verdict else 5, linestyle="none")
        ax.axhline(1.0, color="black", linewidth=0.8)
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.legend(fontsize="x-small")
        caption = (f"{len(shown)} of {len(all_trends)} cases (judged ones first, then the largest moves; "
                   "unmoved ones left out); points: saved runs of a baseline, then each results file in order; "
                   "markers: red down = regression, green up = improvement, grey = unchanged, blue = new")
        figures.append(save(fig, out / f"trend-{metric}.png", title, caption))
    return figures
