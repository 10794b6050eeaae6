"""``python -m pytest_dmlbench plot RESULTS [MORE ...] --out DIR``."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any


def _run(args: argparse.Namespace) -> int:
    from pytest_dmlbench.baseline.reading import load_any
    from pytest_dmlbench.config.output_paths import check_folder_target
    from pytest_dmlbench.plots import render

    check_folder_target(Path(args.out), "--out")  # before the files are read and drawn
    runs = [entry for path in args.results for entry in load_any(Path(path))]
    report = render(runs, Path(args.out))
    for figure in report.figures:
        print(f"wrote {figure.path}")
    for skipped in report.skipped:
        print(f"not drawn: {skipped.family}: {skipped.reason}")
    print(f"report: {report.html}")
    return 0


def register(commands: Any) -> None:
    """Add the ``plot`` subcommand to the CLI's subparsers."""
    plot = commands.add_parser(
        "plot", help="draw PNG plots and a self-contained report.html from results files (oldest first)")
    plot.add_argument("results", nargs="+",
                      help="results or baseline JSON files (or baseline folders), oldest first; single-run "
                      "figures show the last, trends use all")
    plot.add_argument("--out", required=True, metavar="DIR", help="folder for the PNG files and report.html")
    plot.set_defaults(handler=_run)
