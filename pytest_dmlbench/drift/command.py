"""``python -m pytest_dmlbench drift record RESULTS --history DIR`` and ``... drift report --history DIR``.

``record`` adds a nightly results file to the history folder; ``report`` runs the step detector over the
history and prints its findings (``--markdown PATH`` appends the markdown, ``--html REPORT`` adds a section to
a ``report.html``). Exit 0, or 1 with ``--fail-on-drift`` when a regression or creep was found; 2 on bad input.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from pytest_dmlbench.drift.detect import DriftSettings
from pytest_dmlbench.drift.findings import DEFAULT_WINDOW


def _record(args: argparse.Namespace) -> int:
    from pytest_dmlbench.drift.history import append_night, night_from_results
    from pytest_dmlbench.results.jsonio import read_results

    results = read_results(Path(args.results), "Give the results file the nightly wrote (--dmlbench-json PATH).")
    night = night_from_results(results, commit=args.commit or "", ref=args.ref or "", anchor=args.anchor)
    path = append_night(Path(args.history), night)
    print(f"recorded {len(night.points)} case-metric(s) of {night.label} in {path}")
    return 0


def _report(args: argparse.Namespace) -> int:
    from pytest_dmlbench.drift import render
    from pytest_dmlbench.drift.findings import analyse
    from pytest_dmlbench.drift.history import load_history

    settings = DriftSettings(threshold_pct=args.threshold, noise_floor=args.noise_floor / 100.0)
    report = analyse(load_history(Path(args.history)), settings, args.window)
    print(render.text(report))
    if args.markdown:
        with open(args.markdown, "a", encoding="utf-8") as f:
            f.write(render.markdown(report) + "\n")
    if args.html:
        render.insert_into_report(Path(args.html), report)
        print(f"drift section added to {args.html}")
    return 1 if args.fail_on_drift and report.regressions else 0


def _positive(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r} (give a percentage like 10)") from None
    if not value > 0:
        raise argparse.ArgumentTypeError(f"must be above 0, got {text!r}")
    return value


def register(commands: Any) -> None:
    """Add the ``drift`` subcommand to the CLI's subparsers."""
    drift = commands.add_parser("drift", help="nightly history: record a night, find steps and creep across nights")
    actions = drift.add_subparsers(dest="drift_command", required=True)
    record = actions.add_parser("record", help="add a nightly results file to the history folder")
    record.add_argument("results", help="results JSON written by --dmlbench-json")
    record.add_argument("--history", required=True, metavar="DIR", help="history folder (created if missing)")
    record.add_argument("--commit", help="the night's commit (default: the one the results record)")
    record.add_argument("--ref", help="the REF the night gated against, as given")
    record.add_argument("--anchor", action="store_true", help="the night gated against the fixed anchor")
    record.set_defaults(handler=_record)
    report = actions.add_parser("report", help="find steps and creep in the history; print them")
    report.add_argument("--history", required=True, metavar="DIR", help="history folder")
    report.add_argument("--threshold", type=_positive, default=DriftSettings.threshold_pct,
                        help=f"smallest step or creep (sum of steps) reported as a regression, percent "
                        f"(default {DriftSettings.threshold_pct:g})")
    report.add_argument("--noise-floor", type=_positive, default=100 * DriftSettings.noise_floor,
                        help="smallest night-to-night noise assumed, percent (default "
                        f"{100 * DriftSettings.noise_floor:g}); a series' own spread is used when larger")
    report.add_argument("--window", type=int, default=DEFAULT_WINDOW,
                        help=f"newest nights judged (default {DEFAULT_WINDOW}; 0: all)")
    report.add_argument("--markdown", metavar="PATH", help="append the findings as markdown to PATH")
    report.add_argument("--html", metavar="REPORT", help="add the findings as a section to this report.html")
    report.add_argument("--fail-on-drift", action="store_true", help="exit 1 when a regression or creep is found")
    report.set_defaults(handler=_report)
