"""Compute against exposed communication per case (stacked bars of the median step time).

exposed = step time x ``exposed_comm_fraction`` (1 - T(no-communication twin) / T(step)); compute is the
rest of the step. Cases without both figures are left out.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from pytest_dmlbench.plots.figure import MAX_BARS, Figure, Skipped, chunks, new_axes, numbered, save
from pytest_dmlbench.plots.series import labelled, latest, median, ordered
from pytest_dmlbench.results import RunResults
from pytest_dmlbench.results.units import scale_for


def split_step(runs: Sequence[RunResults]) -> list[tuple[str, float, float]]:
    """(label, compute seconds, exposed communication seconds) per case of the latest run."""
    rows = []
    for case in ordered(latest(runs).cases):
        step, fraction = median(case, "step_time_s"), median(case, "exposed_comm_fraction")
        if step is None or fraction is None:
            continue
        exposed = step * min(max(fraction, 0.0), 1.0)
        rows.append((labelled(case), step - exposed, exposed))
    return rows


def draw(runs: Sequence[RunResults], out: Path) -> list[Figure] | Skipped:
    rows = split_step(runs)
    if not rows:
        return Skipped("communication", "no case recorded both step_time_s and exposed_comm_fraction "
                                        "(dmlbench.train(..., twin=...) records them)")
    scale = scale_for("s", max(c + e for _, c, e in rows))
    groups = chunks(rows, MAX_BARS)
    figures = []
    for index, group in enumerate(groups):
        title = "Compute vs exposed communication per step"
        fig, ax = new_axes(title, f"median step time ({scale.label})", "")
        labels = [label for label, _, _ in group]
        compute = [c * scale.factor for _, c, _ in group]
        exposed = [e * scale.factor for _, _, e in group]
        ax.barh(labels, compute, color="tab:blue", label="compute (no-communication twin)")
        ax.barh(labels, exposed, left=compute, color="tab:red", label="exposed communication")
        for y, (c, e) in enumerate(zip(compute, exposed, strict=True)):
            share = e / (c + e) if c + e > 0 else 0.0
            ax.text(c + e, y, f" {share:.0%}", va="center", fontsize="small")
        ax.set_xlim(0, scale.factor * max(c + e for _, c, e in rows) * 1.12)  # one scale for all figures
        ax.invert_yaxis()
        ax.legend(fontsize="small", loc="lower right")
        figures.append(save(fig, out / numbered("communication", index, len(groups)), title,
                            "median step time split by the exposed-communication fraction; "
                            "the percentage is the exposed share"))
    return figures
