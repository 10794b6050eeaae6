"""Command line: ``python -m pytest_dmlbench compare BASELINE RESULTS``, ``... show PATH``, ``... env``,
``... plot RESULTS... --out DIR``, ``... drift record|report`` (:mod:`pytest_dmlbench.drift`) and
``... project RESULTS --ranks N...`` (:mod:`pytest_dmlbench.projection`).

Exit codes: 0 no regression, 1 at least one regression (or improvement with ``--fail-on-improvement``),
2 bad input (unreadable file, unknown folder, bad option) with a message saying what to do.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

from pytest_dmlbench.baseline.fingerprint import machine_key
from pytest_dmlbench.baseline.identity import refresh_template
from pytest_dmlbench.baseline.reading import load_any, load_baseline_for, read_file
from pytest_dmlbench.baseline.store import baselines_root, recorded_identity
from pytest_dmlbench.config import DEFAULT_CPU_THRESHOLD_PCT, DEFAULT_THRESHOLD_PCT, parse_count, parse_threshold
from pytest_dmlbench.config.output_paths import check_file_target
from pytest_dmlbench.drift import command as drift_command
from pytest_dmlbench.envreport import command as env_command
from pytest_dmlbench.errors import ConfigError, DmlbenchError
from pytest_dmlbench.gates.stored.between_runs import MIN_RUNS
from pytest_dmlbench.gates.stored.compare import CompareSettings, compare_case
from pytest_dmlbench.gates.thresholds import Thresholds
from pytest_dmlbench.gates.wording import failing_verdicts
from pytest_dmlbench.plots import command as plot_command
from pytest_dmlbench.results import RunResults
from pytest_dmlbench.results.report import write_results
from pytest_dmlbench.results.student_t import DEFAULT_ALPHA
from pytest_dmlbench.results.table_layout import terminal_table, terminal_width, wrap_text
from pytest_dmlbench.world.run_facts import RunFacts

EXIT_OK, EXIT_REGRESSION, EXIT_BAD_INPUT = 0, 1, 2
SHOWN_NOT_COMPARED = ("no verdicts: these results were not compared, so there are no change and verdict columns "
                      "(`python -m pytest_dmlbench compare BASELINE RESULTS` compares them)")
def compare_with_refresh(baseline: RunResults, current: RunResults, settings: CompareSettings,
                         thresholds: Thresholds, root: Path | None, source: Path) -> RunResults:
    """``compare_run`` whose verdicts give each case's own refresh command (its world size, backend, launcher
    and isolation, and the baselines root when it is not the default)."""
    by_nodeid = {case.nodeid: case for case in baseline.cases}
    compared = RunResults.from_dict(current.to_dict())
    for case in compared.cases:
        template = refresh_template(recorded_identity(case, current.run, source), root)
        case.verdicts = compare_case(by_nodeid.get(case.nodeid), case, replace(settings, refresh_command=template),
                                     thresholds)
    return compared


def _compare(args: argparse.Namespace) -> int:
    settings = CompareSettings(alpha=args.alpha, min_runs=args.min_runs)
    if args.json:
        check_file_target(Path(args.json), "--json")  # before the files are read and compared
    current = read_file(Path(args.results))
    thresholds = Thresholds(args.threshold, DEFAULT_CPU_THRESHOLD_PCT, cpu_where_computing=True,
                            cores=facts.cores_per_world() if (facts := RunFacts.recorded(current.run)) else None)
    label, baseline = load_baseline_for(Path(args.baseline), current, Path(args.results))
    shared = {c.nodeid for c in current.cases} & {c.nodeid for c in baseline.cases}
    if current.cases and baseline.cases and not shared:
        raise DmlbenchError(
            f"nothing to compare: no case of {args.results} ({len(current.cases)} cases, e.g. "
            f"{current.cases[0].nodeid}) is in {label} ({len(baseline.cases)} cases, e.g. {baseline.cases[0].nodeid}); "
            "compare results of the same suite, run from the same rootdir")
    compared = compare_with_refresh(baseline, current, settings, thresholds, baselines_root(Path(args.baseline)),
                                    Path(args.results))
    width = terminal_width()
    print(f"baseline: {label}\nresults:  {args.results}")  # paths stay whole, to be copied
    print(terminal_table(compared, verbose=args.verbose, width=width))
    failing = [
        (c.nodeid, v) for c in compared.cases for v in failing_verdicts(c.verdicts, args.fail_on_improvement)
    ]
    for nodeid, verdict in failing:
        print()
        _print_wrapped(nodeid, width)
        print("\n".join("  " + line for line in wrap_text(verdict.message, width - 2, "  ")))
    current_ids = {c.nodeid for c in compared.cases}
    missing = [c.nodeid for c in baseline.cases if c.nodeid not in current_ids]
    if missing:
        print()
        _print_wrapped(f"{len(missing)} baseline case(s) not in the results: " + ", ".join(missing[:5])
                       + (" ..." if len(missing) > 5 else ""), width)
    if args.json:
        write_results(Path(args.json), compared)
    return EXIT_REGRESSION if failing else EXIT_OK


def _print_wrapped(text: str, width: int) -> None:
    """``text`` wrapped to the terminal's width (continuation lines indented)."""
    print("\n".join(wrap_text(text, width, "    ")))


def _show(args: argparse.Namespace) -> int:
    width = terminal_width()
    for index, (label, results) in enumerate(load_any(Path(args.path))):
        if index:
            print()
        print(f"{label} (machine {machine_key(results.machine)}, created {results.created or 'unknown'})")
        print(terminal_table(results, verbose=args.verbose, width=width, not_compared=SHOWN_NOT_COMPARED))
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


def _min_runs(text: str) -> int:
    """The plugin's own count rule (``parse_count``), reported the argparse way."""
    try:
        return parse_count(text, "--min-runs")
    except ConfigError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


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
        "--min-runs",
        type=_min_runs,
        default=MIN_RUNS,
        help=f"saved runs a figure timed per round needs before it is judged; before that it is inconclusive "
        f"(default {MIN_RUNS}; 1 judges two single runs on their blocks alone)",
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
    drift_command.register(commands)
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
    except BrokenPipeError:  # the reader went away (`show -v | head`): stop quietly, as Unix tools do
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # no second error at interpreter exit
        return EXIT_OK
