"""Text tables of a projection: the calibration, the check against measurements, the projected figures."""

from __future__ import annotations

from collections.abc import Sequence

from tabulate import tabulate

from pytest_dmlbench.projection.analysis import Calibration, Check, Family
from pytest_dmlbench.projection.holdout import HELD_OUT_KINDS, HeldOut, median_error, why_not
from pytest_dmlbench.projection.model import Network, Projection, project


def calibration_table(cal: Calibration) -> str:
    rows = [[op, f.points, ",".join(map(str, f.world_sizes)), f"{f.alpha_s * 1e6:.1f}", f"{f.bandwidth_gbps:.3f}",
             f"{f.max_rel_residual * 100:.1f}"] for op, f in cal.fits.items()]
    rows += [[f"{op} (ws{p} only)", f.points, p, f"{f.alpha_s * 1e6:.1f}", f"{f.bandwidth_gbps:.3f}",
              f"{f.max_rel_residual * 100:.1f}"] for (op, p), f in cal.by_world_size.items()]
    rows += [[op, "-", "-", "-", "-", why] for op, why in cal.skipped.items()]
    table = tabulate(rows, headers=["collective", "points", "world sizes", "alpha (us)", "bandwidth (GB/s)",
                                    "max residual (%)"], tablefmt="github")
    net = cal.network
    return (f"{table}\n\nnetwork used: alpha = {net.alpha_s * 1e6:.1f} us, "
            f"bandwidth = {1 / net.beta_s_per_byte / 1e9:.3f} GB/s ({cal.source})")


def _pct(value: float | None) -> str:
    return "" if value is None else f"{value * 100:+.0f}%"


def _ms(value: float) -> str:
    return f"{value * 1e3:.2f}"


def check_table(checks: Sequence[Check]) -> str:
    """Measured against predicted; errors are ``predicted / measured - 1``; ``!`` marks oversubscription."""
    rows = []
    for c in checks:
        speedup_error = _pct(Check.error(c.base_speedup, c.measured_speedup))
        label = c.nodeid.rsplit("::", 1)[-1] + (" !" if c.oversubscribed else "")
        rows.append([
            label, c.world_size, _ms(c.measured_step_s),
            f"{_ms(c.own_step_s)} ({_pct(Check.error(c.own_step_s, c.measured_step_s))})",
            f"{_ms(c.own_step_overlap_s)} ({_pct(Check.error(c.own_step_overlap_s, c.measured_step_s))})",
            f"{_ms(c.base_step_s)} ({_pct(Check.error(c.base_step_s, c.measured_step_s))})",
            "" if c.measured_speedup is None else f"{c.measured_speedup:.2f}",
            "" if c.base_speedup is None else f"{c.base_speedup:.2f} ({speedup_error})",
        ])
    return tabulate(rows, headers=["case", "ws", "step ms", "own twin", "own twin, overlap", "smallest-ws twin",
                                   "speedup", "predicted speedup"], tablefmt="github")


def _size(nbytes: float) -> str:
    for unit, scale in (("MiB", 1 << 20), ("KiB", 1 << 10)):
        if nbytes >= scale:
            return f"{nbytes / scale:.4g} {unit}"
    return f"{nbytes:g} B"


def _held_out_cell(predicted: float | None, measured: float) -> str:
    return "" if predicted is None else f"{_ms(predicted)} ({_pct(predicted / measured - 1)})"


def holdout_table(rows: Sequence[HeldOut]) -> str:
    """Per measured collective: its time and its predictions by fits without its message size and without
    its world size; then the median error per collective and over all, or why a kind cannot be checked."""
    table = tabulate([[r.op, r.world_size, _size(r.nbytes), _ms(r.measured_s),
                       _held_out_cell(r.size_out_s, r.measured_s), _held_out_cell(r.world_size_out_s, r.measured_s)]
                      for r in rows],
                     headers=["collective", "ws", "size", "measured ms", "size held out", "world size held out"],
                     tablefmt="github", disable_numparse=True)
    ops = list(dict.fromkeys(r.op for r in rows))
    medians = [[op, *(_abs_pct(median_error(rows, kind, op)) for kind in HELD_OUT_KINDS)] for op in ops]
    medians.append(["all", *(_abs_pct(median_error(rows, kind)) for kind in HELD_OUT_KINDS)])
    summary = tabulate(medians, headers=["median |error|", "size held out", "world size held out"],
                       tablefmt="github")
    labels = ("message size", "world size")
    reasons = [f"{label} held out: not checked, {why}" for kind, label in zip(HELD_OUT_KINDS, labels, strict=True)
               if (why := why_not(rows, kind)) is not None]
    return "\n\n".join([table, summary, *reasons])


def _abs_pct(value: float | None) -> str:
    return "-" if value is None else f"{value * 100:.0f}%"


def projection_rows(family: Family, net: Network, algorithms: Sequence[str], ranks: Sequence[int],
                    backward_share: float) -> list[tuple[Projection, Projection]]:
    """(without overlap, with overlap) per algorithm and rank count."""
    return [(project(family.workload, net, alg, p, overlap=False, backward_share=backward_share),
             project(family.workload, net, alg, p, overlap=True, backward_share=backward_share))
            for alg in algorithms for p in ranks]


def projection_table(family: Family, pairs: Sequence[tuple[Projection, Projection]]) -> str:
    w = family.workload
    head = (f"{family.name}: compute {_ms(w.compute_s)} ms (ws{family.base.world_size} twin), gradient "
            f"{w.grad_bytes / 1e6:.3f} MB in {w.messages} message(s), {w.per_rank_batch:g} samples per rank")
    rows = [[plain.algorithm, plain.ranks, f"{_ms(plain.step_s)} / {_ms(over.step_s)}",
             f"{plain.throughput:.0f} / {over.throughput:.0f}", f"{plain.speedup:.1f} / {over.speedup:.1f}",
             f"{plain.efficiency:.2f} / {over.efficiency:.2f}",
             f"{plain.comm_fraction:.2f} / {over.comm_fraction:.2f}"] for plain, over in pairs]
    table = tabulate(rows, headers=["algorithm", "ranks", "step ms", "samples/s", "speedup", "efficiency",
                                    "comm fraction"], tablefmt="github")
    return f"{head}\n(each cell: without / with overlap of communication and backward)\n{table}"
