"""Training curves of experiments and the final accuracy of every case that records one.

An experiment records ``loss`` once per epoch (in epoch order) and ``accuracy`` once, on held-out data after
the last epoch. ``training.png`` draws the loss per epoch (one line per case) beside each case's final
accuracy as a bar; it never places the accuracy at an epoch. Cases that record an accuracy but no per-epoch
loss (bench cases such as the robust-training suite) get ``accuracy.png``: their final accuracy as bars.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pytest_dmlbench.plots.figure import (
    MAX_BARS,
    MAX_SERIES,
    Figure,
    Skipped,
    chunks,
    new_axes,
    new_figure,
    numbered,
    save,
    style,
)
from pytest_dmlbench.plots.series import labelled, latest, ordered
from pytest_dmlbench.results import CaseResult, RunResults


def losses(case: CaseResult) -> list[float]:
    """The case's finite per-epoch losses, in epoch order (empty when it records none)."""
    metric = case.metrics.get("loss")
    return [] if metric is None else [s for s in metric.samples if s == s]


def final_accuracy(case: CaseResult) -> float | None:
    """The accuracy reached at the end of training: the last finite sample of ``accuracy``."""
    metric = case.metrics.get("accuracy")
    finite = [] if metric is None else [s for s in metric.samples if s == s]
    return finite[-1] if finite else None


def _accuracy_bars(ax: Any, cases: Sequence[CaseResult]) -> None:
    from matplotlib.ticker import PercentFormatter

    labels = [labelled(c) for c in cases]
    values = [final_accuracy(c) or 0.0 for c in cases]
    ax.barh(labels, values, color="tab:purple")
    for y, value in enumerate(values):
        ax.text(value, y, f" {value:.1%}", va="center", fontsize="small")
    ax.set_xlim(0, 1.15)
    ax.xaxis.set_major_formatter(PercentFormatter(xmax=1.0))
    ax.invert_yaxis()


def _draw_curves(cases: Sequence[CaseResult], out: Path) -> list[Figure]:
    groups = chunks(list(cases), MAX_SERIES)
    figures = []
    for index, group in enumerate(groups):
        scored = [c for c in group if final_accuracy(c) is not None]
        fig, axes = new_figure(2 if scored else 1)
        loss_ax = style(axes[0], "training loss per epoch", "epoch", "loss (mean over the epoch)")
        most = max(len(losses(c)) for c in group)
        for case in group:
            points = losses(case)
            loss_ax.plot(range(1, len(points) + 1), points, marker="o", label=labelled(case))
        loss_ax.set_xticks(range(1, most + 1))
        loss_ax.legend(fontsize="x-small")
        caption = "loss: one point per epoch"
        if scored:
            _accuracy_bars(style(axes[1], "final accuracy (held-out)", "accuracy after the last epoch", ""),
                           scored)
            caption += "; accuracy: measured once, on held-out data after the last epoch"
        title = "Training loss and final accuracy"
        fig.suptitle(title)
        figures.append(save(fig, out / numbered("training", index, len(groups)), title, caption))
    return figures


def _draw_accuracy(cases: Sequence[CaseResult], out: Path) -> list[Figure]:
    groups = chunks(list(cases), MAX_BARS)
    figures = []
    for index, group in enumerate(groups):
        title = "Final accuracy per case"
        fig, ax = new_axes(title, "accuracy (held-out)", "")
        _accuracy_bars(ax, group)
        figures.append(save(fig, out / numbered("accuracy", index, len(groups)), title,
                            "accuracy each case recorded at its end; these cases record no per-epoch loss"))
    return figures


def draw(runs: Sequence[RunResults], out: Path) -> list[Figure] | Skipped:
    cases = ordered(latest(runs).cases)
    curves = [c for c in cases if losses(c)]
    accuracy_only = [c for c in cases if not losses(c) and final_accuracy(c) is not None]
    if not curves and not accuracy_only:
        return Skipped("training", "no case recorded a per-epoch loss or an accuracy (experiment files do)")
    return [*(_draw_curves(curves, out) if curves else []), *(_draw_accuracy(accuracy_only, out)
                                                            if accuracy_only else [])]
