"""``python -m pytest_dmlbench project RESULTS.json --ranks 8 16 ... 1024``: the command-line front end."""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path
from typing import Any

from pytest_dmlbench.config import parse_count
from pytest_dmlbench.errors import ConfigError, DmlbenchError, ProjectionError
from pytest_dmlbench.projection.analysis import Family, calibrate, validate, workloads
from pytest_dmlbench.projection.holdout import HELD_OUT_KINDS, held_out, median_error
from pytest_dmlbench.projection.inputs import collective_timings
from pytest_dmlbench.projection.model import ALGORITHMS, DEFAULT_BACKWARD_SHARE
from pytest_dmlbench.projection.tables import (
    calibration_table,
    check_table,
    holdout_table,
    projection_rows,
    projection_table,
)
from pytest_dmlbench.results import RunResults
from pytest_dmlbench.results.jsonio import read_results

DEFAULT_RANKS = [2**k for k in range(11)]  # 1 .. 1024
RESULTS_HINT = "Pass a results file written by `pytest --dmlbench ... --dmlbench-json PATH`."


def _count(option: str) -> Callable[[str], int]:
    """The plugin's one count rule (:func:`~pytest_dmlbench.config.parse_count`) as an argparse type."""

    def parse(text: str) -> int:
        try:
            return parse_count(text, option)
        except ConfigError as exc:
            raise argparse.ArgumentTypeError(str(exc).removeprefix(f"{option}: ")) from None  # argparse names it

    return parse


def _positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not value > 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"must be a finite number > 0, got {text!r}")
    return value


def _share(text: str) -> float:
    value = _positive_float(text)
    if value > 1:
        raise argparse.ArgumentTypeError(f"a share of the compute lies in (0, 1], got {text!r}")
    return value


def add_parser(commands: Any) -> None:
    """Register the ``project`` subcommand on an argparse subparsers object."""
    parser = commands.add_parser(
        "project",
        help="project step time, speedup and communication fraction to many ranks (alpha-beta model)",
        description="Fit latency and bandwidth on the collective cases of a results file, check that fit on "
        "collectives held out of it (by message size and by world size), project every training case measured "
        "beside its no-communication twin to more ranks, and check the model on the world sizes that were "
        "measured.",
    )
    parser.add_argument("results", nargs="+", help="results JSON file(s) written by --dmlbench-json (merged)")
    parser.add_argument("--ranks", nargs="+", type=_count("--ranks"), default=DEFAULT_RANKS, metavar="N",
                        help="rank counts to project to (default 1 2 4 ... 1024)")
    parser.add_argument("--algorithm", choices=ALGORITHMS, action="append",
                        help="exchange to model: ring, tree or ps (repeatable; default all three; the check "
                        "against measurements uses the first, default ring)")
    parser.add_argument("--latency-us", type=_positive_float, help="per-message latency instead of the fit")
    parser.add_argument("--bandwidth-gbps", type=_positive_float, help="link bandwidth in GB/s instead of the fit")
    parser.add_argument("--collective", default="all_reduce",
                        help="collective whose fit calibrates the network (default all_reduce)")
    parser.add_argument("--messages", type=_count("--messages"),
                        help="messages per step (default: one per 25 MiB of gradient, DDP's bucket)")
    parser.add_argument("--backward-share", type=_share, default=DEFAULT_BACKWARD_SHARE,
                        help="share of the compute that communication can overlap (default 2/3: the backward)")
    parser.add_argument("--case", metavar="TEXT", help="project only case families whose name contains TEXT")
    parser.add_argument("--plot", metavar="PNG", help="write the projected speedup with measured points here")
    parser.add_argument("--json", metavar="PATH", help="write calibration, check and projection as JSON")
    parser.set_defaults(handler=run)


def _merged(paths: list[str]) -> RunResults:
    merged: RunResults | None = None
    for path in paths:
        results = read_results(Path(path), RESULTS_HINT)
        if merged is None:
            merged = results
        else:
            merged.cases.extend(results.cases)
    assert merged is not None
    return merged


def _families(results: RunResults, messages: int | None, checked: bool) -> tuple[list[Family], str | None]:
    """The training families, or none and why when the results hold only collectives (which are still
    worth their calibration and held-out check: ``checked``)."""
    try:
        return workloads(results, messages=messages), None
    except ProjectionError as exc:
        if not checked:
            raise
        return [], str(exc)


def run(args: argparse.Namespace) -> int:
    from pytest_dmlbench.config.output_paths import check_file_target

    for option, target in (("--plot", args.plot), ("--json", args.json)):
        if target:
            check_file_target(Path(target), option)  # before the files are read and fitted
    results = _merged(args.results)
    cal = calibrate(results, op=args.collective, latency_us=args.latency_us, bandwidth_gbps=args.bandwidth_gbps)
    holdout = held_out(collective_timings(results))
    families, no_training = _families(results, args.messages, checked=bool(holdout))
    print("Calibration (least squares over message sizes, per collective)\n")
    print(calibration_table(cal))
    if holdout:
        print("\nHeld-out check of the collective model (each point predicted by a fit without its message size, "
              "and by one without its world size; times in ms, error = predicted / measured - 1)\n")
        print(holdout_table(holdout))
    if no_training is not None:
        print(f"\nNothing to project: {no_training}")
        if args.case or args.plot:
            raise ProjectionError("--case and --plot need training cases in the results")
    if args.case:
        families = [f for f in families if args.case in f.name]
        if not families:
            raise DmlbenchError(f"no training case family contains {args.case!r}; drop --case to see them all")
    algorithms = list(dict.fromkeys(args.algorithm or ALGORITHMS))
    ranks = sorted(set(args.ranks))
    checks = validate(families, cal.network, algorithms[0], backward_share=args.backward_share)
    if families:
        print(f"\nCheck against the measured cases ({algorithms[0]} exchange; step times in ms, error = predicted / "
              "measured - 1; ! = oversubscribed)\n")
        print(check_table(checks))
    projected = {}
    for family in families:
        pairs = projection_rows(family, cal.network, algorithms, ranks, args.backward_share)
        projected[family.name] = pairs
        print("\n" + projection_table(family, pairs))
    if args.plot:
        from pytest_dmlbench.projection.plot import plot_speedup

        path = plot_speedup(Path(args.plot), families, checks, cal.network, algorithms, ranks, args.backward_share)
        print(f"\nplot written to {path}")
    if args.json:
        document = {
            "network": asdict(cal.network),
            "source": cal.source,
            "fits": {op: asdict(f) for op, f in cal.fits.items()},
            "held_out": [asdict(r) for r in holdout],
            "held_out_median_abs_error": {kind: median_error(holdout, kind) for kind in HELD_OUT_KINDS},
            "checks": [asdict(c) for c in checks],
            "projections": {name: [asdict(x) for pair in pairs for x in pair] for name, pairs in projected.items()},
        }
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps(document, indent=1, default=str))
    return 0
