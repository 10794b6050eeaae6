"""Where the test command's time goes: the slowest tests of a logged run, as the Markdown page
``docs/evidence/test-durations.md`` keeps, dated and with the machine's speed beside them.

Reads the log of ``bash .ci/run`` (or of the README's test command run after ``python ci/machine_speed.py``):
pytest's ``slowest N durations`` section, its closing line, the machine speed lines and the install time
``.ci/run`` prints. Writes the page, or prints it with ``--print``.

    CI=true bash .ci/run 2>&1 | tee ci-run.log
    python ci/test_durations.py ci-run.log                      # rewrites docs/evidence/test-durations.md
    python ci/test_durations.py ci-run.log --print --top 10     # the ten slowest, on stdout
"""

from __future__ import annotations

import argparse
import re
import sys
from dataclasses import dataclass
from datetime import date
from pathlib import Path

PAGE = Path(__file__).resolve().parents[1] / "docs" / "evidence" / "test-durations.md"
DURATION = re.compile(r"^(?P<seconds>\d+(?:\.\d+)?)s (?P<phase>call|setup|teardown)\s+(?P<nodeid>\S.*)$")
SPEED = re.compile(r"machine speed: .*: (?P<gflops>\d+(?:\.\d+)?) GFLOPS(?:; .*: (?P<imports>[\d.]+) s)?")
CLOSING = re.compile(r"^=+ (?P<summary>.*\d+ passed.*) in (?P<seconds>[\d.]+)s")
STEP = re.compile(r"^(?P<name>[a-z ]+) took (?P<seconds>\d+) s$")


class LogProblem(ValueError):
    """The log lacks what the page needs."""


@dataclass(frozen=True)
class Duration:
    seconds: float
    phase: str
    nodeid: str


@dataclass(frozen=True)
class RunLog:
    durations: list[Duration]
    speeds: list[float]
    imports: list[float]
    closings: list[tuple[str, float]]
    steps: list[tuple[str, int]]


def parse(text: str) -> RunLog:
    """The durations, machine speeds, pytest closing lines and ``.ci/run``'s step times found in ``text``."""
    durations, speeds, imports, closings, steps = [], [], [], [], []
    for line in text.splitlines():
        line = line.strip()
        if found := DURATION.match(line):
            durations.append(Duration(float(found["seconds"]), found["phase"], found["nodeid"]))
        elif found := SPEED.search(line):
            speeds.append(float(found["gflops"]))
            if found["imports"]:
                imports.append(float(found["imports"]))
        elif found := CLOSING.match(line):
            closings.append((found["summary"], float(found["seconds"])))
        elif found := STEP.match(line):
            steps.append((found["name"], int(found["seconds"])))
    if not durations:
        raise LogProblem("no 'slowest durations' lines in the log: run the README's test command, which passes "
                         "--durations, and keep its whole output")
    if not speeds:
        raise LogProblem("no 'machine speed: ... GFLOPS' line in the log: run `python ci/machine_speed.py` in the "
                         "same log (.ci/run prints it before and after the tests)")
    return RunLog(durations, speeds, imports, closings, steps)


def page(log: RunLog, top: int, day: str, source: str, context: str = "") -> str:
    """The Markdown page: the run's facts, then the ``top`` slowest test phases."""
    speeds = ", ".join(f"{s:.0f}" for s in log.speeds)
    imported = (f" and a fresh python imported torch in {', '.join(f'{s:.2f}' for s in log.imports)} s"
                if log.imports else "")
    lines = [
        "# Where the test command's time goes",
        "",
        f"Measured on {day} ({source}), on a 2-core host whose 1024x1024 float32 matmul on 2 "
        f"threads ran at {speeds} GFLOPS{imported} (`python ci/machine_speed.py`, before and after the tests). "
        "The slowest host seen ran the product at 40 GFLOPS; the aim is `.ci/run` within 20 minutes there. Both "
        "figures move with the machine's load. Refresh this page when the slowest tests change: "
        "`python ci/test_durations.py LOG` (its docstring gives the commands).",
        "",
    ]
    if context:
        lines += [context, ""]
    for name, seconds in log.steps:
        lines.append(f"- {name}: {seconds} s ({seconds / 60:.1f} min)")
    for summary, seconds in log.closings:
        lines.append(f"- pytest: {summary} in {seconds:.0f} s ({seconds / 60:.1f} min)")
    lines += ["", f"The {top} slowest test phases (pytest's `--durations`; seconds of wall time on one of the two "
              "xdist workers):", "", "| # | seconds | phase | test |", "|---:|---:|---|---|"]
    ranked = sorted(log.durations, key=lambda d: d.seconds, reverse=True)[:top]
    for rank, item in enumerate(ranked, start=1):
        lines.append(f"| {rank} | {item.seconds:.1f} | {item.phase} | `{item.nodeid}` |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("log", type=Path, help="the output of `bash .ci/run` (or of the README's test command)")
    parser.add_argument("--top", type=int, default=50, help="how many of the slowest test phases to list (50)")
    parser.add_argument("--print", action="store_true", help="print the page instead of writing it")
    parser.add_argument("--date", default=date.today().isoformat(), help="the day the log was made (today)")
    parser.add_argument("--source", default="`CI=true bash .ci/run` in a fresh clone",
                        help="how the run was made, for the page")
    parser.add_argument("--context", default="", help="a paragraph for the page: what the run is compared with")
    args = parser.parse_args(argv)
    if args.top < 1:
        parser.error(f"--top {args.top}: give a positive count")
    try:
        log = parse(args.log.read_text(errors="replace"))
    except FileNotFoundError:
        parser.error(f"{args.log}: no such file; give the saved output of `bash .ci/run`")
    except LogProblem as problem:
        print(f"{args.log}: {problem}", file=sys.stderr)
        return 2
    text = page(log, args.top, args.date, args.source, args.context)
    if args.print:
        print(text, end="")
    else:
        PAGE.write_text(text)
        print(f"written {PAGE}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
