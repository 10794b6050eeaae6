"""Loss and accuracy per epoch of experiments: every sample of a ``loss`` or ``accuracy`` metric is one
epoch (an experiment records them in epoch order); one line per case."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from pytest_dmlbench.plots.figure import Figure, Skipped, chunks, new_figure, numbered, save, style
from pytest_dmlbench.plots.series import labelled, latest, ordered
from pytest_dmlbench.results import RunResults

METRICS = ("loss", "accuracy")


def draw(runs: Sequence[RunResults], out: Path) -> list[Figure] | Skipped:
    cases = [c for c in ordered(latest(runs).cases) if any(m in c.metrics for m in METRICS)]
    if not cases:
        return Skipped("training", "no case recorded per-epoch loss or accuracy metrics (experiment files do)")
    groups = chunks(cases)
    figures = []
    for index, group in enumerate(groups):
        fig, axes = new_figure(2)
        for ax, name in zip(axes, METRICS, strict=True):
            style(ax, name, "epoch", name if name == "loss" else "accuracy (held-out)")
            for case in group:
                metric = case.metrics.get(name)
                if metric is None or not metric.samples:
                    continue
                epochs = list(range(1, len(metric.samples) + 1))
                ax.plot(epochs, metric.samples, marker="o", label=labelled(case))
                ax.set_xticks(epochs)
        axes[0].legend(fontsize="x-small")
        title = "Loss and accuracy per epoch"
        fig.suptitle(title)
        figures.append(save(fig, out / numbered("training", index, len(groups)), title,
                            "one point per epoch; accuracy on held-out data"))
    return figures
