"""Command line: ``python -m pytest_dmlbench compare BASELINE RESULTS``, ``... show PATH``, ``... env``,
``... plot RESULTS... --out DIR`` and ``... project RESULTS --ranks N...`` (:mod:`pytest_dmlbench.projection`).

Exit codes: 0 no regression, 1 at least one regression (or improvement with ``--fail-on-improvement``),
2 bad input (unreadable file, unknown folder, bad option) with a message saying what to do.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from pytest_dmlbench.baseline.compare import (
    DEFAULT_ALPHA,
    CompareSettings,
    compare_run,
    failing_verdicts,
)
from pytest_dmlbench.baseline.fingerprint import machine_key
from pytest_dmlbench.baseline.jsonio import read_results
from pytest_dmlbench.baseline.store import baseline_files, load_folder
from pytest_dmlbench.config import DEFAULT_THRESHOLD_PCT, parse_threshold
from pytest_dmlbench.envreport import command as env_command
from pytest_dmlbench.errors import ConfigError, DmlbenchError
from pytest_dmlbench.plots import command as plot_command
from pytest_dmlbench.report import terminal_table, write_results
from pytest_dmlbench.results import RunResults

EXIT_OK, EXIT_REGRESSION, EXIT_BAD_INPUT = 0, 1, 2
FILE_HINT = "Pass a results file written by --dmlbench-json, a baseline file, or a baseline folder."


def _read_file(path: Path) -> RunResults:
    return read_results(path, FILE_HINT)


def _machine_folders(root: Path) -> list[Path]:
    return sorted(p for p in root.iterdir() if p.is_dir() and baseline_files(p))


def load_any(path: Path) -> list[tuple[str, RunResults]]:
    """Read a results/baseline file, a machine folder, or a baselines root (one entry per machine folder)."""
    if path.is_file():
        return [(str(path), _read_file(path))]
    if not path.is_dir():
        raise DmlbenchError(f"{path}: no such file or folder.\n{FILE_HINT}")
    if baseline_files(path):
        return [(str(path), load_folder(path))]
    folders = _machine_folders(path)
    if not folders:
        raise DmlbenchError(
            f"{path}: holds no baseline files (*.json) nor machine folders with any.\n{FILE_HINT}"
        )
    return [(str(folder), load_folder(folder)) for folder in folders]


def load_baseline_for(path: Path, current: RunResults) -> tuple[str, RunResults]:
    """The baseline to compare ``current`` with; a baselines root resolves to the folders of the results'
    machine, one per backend its cases used (the backend is part of the machine key)."""
    if path.is_file() or baseline_files(path) or not path.is_dir():
        [(label, baseline)] = load_any(path)
        return label, baseline
    backends = sorted({case.backend for case in current.cases} or {str(current.machine.get("backend"))})
    keys = [machine_key({**current.machine, "backend": backend}) for backend in backends]
    found = [key for key in keys if baseline_files(path / key)]
    if not found:
        names = ", ".join(f.name for f in _machine_folders(path)) or "nothing"
        raise DmlbenchError(
            f"{path}: no baseline for this machine (key {', '.join(keys)}); it has: {names}.\n"
            "Pass one of these folders explicitly to compare across machines, or save baselines on this "
            "machine with `pytest --dmlbench --dmlbench-save`."
        )
    merged = load_folder(path / found[0])
    for key in found[1:]:
        merged.cases.extend(load_folder(path / key).cases)
    return ", ".join(str(path / key) for key in found), merged


def _compare(args: argparse.Namespace) -> int:
    settings = CompareSettings(threshold_pct=args.threshold, alpha=args.alpha)
    current = _read_file(Path(args.results))
    label, baseline = load_baseline_for(Path(args.baseline), current)
    compared = compare_run(baseline, current, settings)
    print(f"baseline: {label}\nresults:  {args.results}")
    print(terminal_table(compared, verbose=args.verbose))
    failing = [
        (c.nodeid, v) for c in compared.cases for v in failing_verdicts(c.verdicts, args.fail_on_improvement)
    ]
    for nodeid, verdict in failing:
        print(f"\n{nodeid}\n  " + verdict.message.replace("\n", "\n  "))
    current_ids = {c.nodeid for c in compared.cases}
    missing = [c.nodeid for c in baseline.cases if c.nodeid not in current_ids]
    if missing:
        print(
            f"\n{len(missing)} baseline case(s) not in the results: "
            + ", ".join(missing[:5])
            + (" ..." if len(missing) > 5 else "")
        )
    if args.json:
        write_results(Path(args.json), compared)
    return EXIT_REGRESSION if failing else EXIT_OK


def _show(args: argparse.Namespace) -> int:
    for index, (label, results) in enumerate(load_any(Path(args.path))):
        if index:
            print()
        print(f"{label} (machine {machine_key(results.machine)}, created {results.created or 'unknown'})")
        print(terminal_table(results, verbose=args.verbose))
    return EXIT_OK


def _percent(text: str) -> float:
    """The plugin's own threshold rule (``parse_threshold``), reported the argparse way."""
    try:
        return parse_threshold(text, "--threshold")
    except ConfigError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _alpha(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r} (give a probability like 0.01)") from None
    if not 0.0 < value < 1.0:
        raise argparse.ArgumentTypeError(f"must lie strictly between 0 and 1, got {text!r}")
    return value


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m pytest_dmlbench",
        description="Compare, show and plot pytest-dmlbench results; report the environment.",
    )
    commands = parser.add_subparsers(dest="command", required=True)
    compare = commands.add_parser("compare", help="compare results with a baseline; exit 1 on a regression")
    compare.add_argument("baseline", help="baseline or results JSON file, machine folder, or baselines root")
    compare.add_argument("results", help="results JSON file (written by --dmlbench-json)")
    compare.add_argument(
        "--threshold",
        type=_percent,
        default=DEFAULT_THRESHOLD_PCT,
        help=f"default regression threshold in percent (default {DEFAULT_THRESHOLD_PCT:g}); "
        "a case's own threshold wins",
    )
    compare.add_argument(
        "--alpha",
        type=_alpha,
        default=DEFAULT_ALPHA,
        help=f"significance level of the one-sided block test (default {DEFAULT_ALPHA})",
    )
    compare.add_argument(
        "--fail-on-improvement",
        action="store_true",
        help="also exit 1 on significant improvements (a stale baseline)",
    )
    compare.add_argument("--json", metavar="PATH", help="write the results with verdicts to PATH")
    compare.add_argument("-v", "--verbose", action="store_true", help="every metric, not only each case's headline")
    compare.set_defaults(handler=_compare)
    show = commands.add_parser("show", help="print the table of a results/baseline file or folder")
    show.add_argument("path", help="results or baseline JSON file, machine folder, or baselines root")
    show.add_argument("-v", "--verbose", action="store_true", help="every metric, not only each case's headline")
    show.set_defaults(handler=_show)
    env_command.register(commands)
    plot_command.register(commands)
    from pytest_dmlbench.projection.command import add_parser as add_project_parser

    add_project_parser(commands)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return int(args.handler(args))
    except DmlbenchError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
