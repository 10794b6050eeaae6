"""``python -m pytest_dmlbench env [--json] [--no-live]``."""

from __future__ import annotations

import argparse
import json
from typing import Any

EXIT_OK, EXIT_CHECK_FAILED = 0, 1


def _seconds(text: str) -> float:
    """The plugin's own rule for seconds (``parse_positive_seconds``), reported the argparse way."""
    from pytest_dmlbench.config import parse_positive_seconds
    from pytest_dmlbench.errors import ConfigError

    try:
        return parse_positive_seconds(text, "--timeout")
    except ConfigError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _run(args: argparse.Namespace) -> int:
    from pytest_dmlbench.envreport import environment_report
    from pytest_dmlbench.envreport.text import render_text

    report = environment_report(live=not args.no_live, timeout_s=args.timeout)
    print(json.dumps(report, indent=2, sort_keys=True, default=str) if args.json else render_text(report))
    check = report["live_check"]
    return EXIT_CHECK_FAILED if check is not None and not check["ok"] else EXIT_OK


def register(commands: Any) -> None:
    """Add the ``env`` subcommand to the CLI's subparsers."""
    env = commands.add_parser(
        "env", help="report the machine, software, GPUs, backends and distributed variables; "
        "check a 2-rank gloo world (exit 1 when that check fails)")
    env.add_argument("--json", action="store_true", help="print the report as JSON")
    env.add_argument("--no-live", action="store_true", help="skip the live 2-rank gloo check")
    env.add_argument("--timeout", type=_seconds, default=60.0, metavar="S",
                     help="seconds the live check may take (default 60)")
    env.set_defaults(handler=_run)
