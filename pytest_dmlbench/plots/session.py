"""``--dmlbench-plots DIR``: the plots and ``report.html`` of a pytest run, with trends against the
stored baselines of this machine when there are any."""

from __future__ import annotations

from pathlib import Path

from pytest_dmlbench.results import RunResults


def baseline_runs(results: RunResults, baseline_dir: Path, saved: bool) -> list[tuple[str, RunResults]]:
    """This machine's stored baselines for the backends the run used (their saved-run history gives the
    trend's earlier points). After ``--dmlbench-save`` they hold this run already, so they replace it. In a
    paired run they are history only (the run compared with REF), and their label says so."""
    from pytest_dmlbench.baseline.fingerprint import machine_key
    from pytest_dmlbench.baseline.store import load_matching
    from pytest_dmlbench.plots.verdict_html import paired_reference

    folders, merged = load_matching(
        results, lambda backend: baseline_dir / machine_key({**results.machine, "backend": backend}), Path("this run"))
    if not folders:
        return []
    label = ", ".join(str(folder) for folder in folders)
    if paired_reference(results) is not None:
        return [(f"{label} (stored baselines: trend history, not this run's comparison)", merged)]
    return [(f"{label} (baselines, with this run)" if saved else f"{label} (baselines)", merged)]


def write_run_plots(results: RunResults, out: Path, baseline_dir: Path, saved: bool) -> str:
    """Render the plots for a finished run; the line to print (where the report is, or why not)."""
    from pytest_dmlbench.errors import DmlbenchError
    from pytest_dmlbench.plots import render

    try:
        stored = baseline_runs(results, baseline_dir, saved)
        runs = stored if saved and stored else [*stored, ("this run", results)]
        report = render(runs, out)
    except DmlbenchError as exc:
        return f"dmlbench: no plots written: {exc}"
    return f"dmlbench: {len(report.figures)} plot(s) and the report written to {report.html}"
