"""How often the timing validations reach a verdict, on this machine as it is or beside a CPU hog.

Runs the two timing validations of ``bench_cases/test_measurement_validation.py`` (exposed-communication
fraction against an injected delay, harness busbw against a plain timing loop) ``--runs`` times, each in
its own pytest session, and counts per validation how many runs passed, failed or were not judged. With
``--hog N``, N busy-looping processes compete for the cores during every run. Prints the date, the machine
and the command beside the counts.

    python -m studies.validation_judged_rate --runs 10         # idle machine: the README's target is >= 9 of 10 judged
    python -m studies.validation_judged_rate --runs 5 --hog 2  # loaded: never a failure, a miss is "not judged"
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import platform
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from collections import Counter
from datetime import datetime, timezone
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SELECTION = "injected_hook_sleep or busbw_matches"


def spin_forever() -> None:
    while True:
        pass


def outcomes(junit: Path) -> dict[str, str]:
    """Validation name -> 'passed', 'failed' or 'not judged' (or the skip reason) from a JUnit file."""
    found = {}
    for case in ET.parse(junit).getroot().iter("testcase"):
        name = case.get("name", "?")
        skipped, failure = case.find("skipped"), case.find("failure")
        if failure is not None or case.find("error") is not None:
            found[name] = "failed"
        elif skipped is not None:
            message = skipped.get("message", "")
            found[name] = "not judged" if "not judged" in message else f"skipped: {message}"
        else:
            found[name] = "passed"
    return found


def one_run(folder: Path, index: int) -> dict[str, str]:
    junit = folder / f"run{index}.xml"
    command = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "--dmlbench", "--world-size", "2",
               "bench_cases/test_measurement_validation.py", "-k", SELECTION, f"--junitxml={junit}"]
    subprocess.run(command, cwd=ROOT, capture_output=True, text=True, check=False)
    return outcomes(junit)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--hog", type=int, default=0, help="busy-looping processes beside every run")
    args = parser.parse_args(argv)
    hogs = [multiprocessing.Process(target=spin_forever, daemon=True) for _ in range(args.hog)]
    for hog in hogs:
        hog.start()
    counts: dict[str, Counter[str]] = {}
    started = time.monotonic()
    try:
        with tempfile.TemporaryDirectory() as folder:
            for index in range(args.runs):
                for name, outcome in one_run(Path(folder), index).items():
                    counts.setdefault(name, Counter())[outcome] += 1
                    print(f"run {index + 1}: {name}: {outcome}", flush=True)
    finally:
        for hog in hogs:
            hog.terminate()
    print(f"\n{datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC, {platform.node()}, {os.cpu_count()} cores, "
          f"{args.hog} hog(s), {time.monotonic() - started:.0f} s; python -m studies.validation_judged_rate "
          f"--runs {args.runs} --hog {args.hog}")
    for name, counter in sorted(counts.items()):
        judged = counter["passed"] + counter["failed"]
        print(f"{name}: judged {judged}/{args.runs} ({dict(counter)})")


if __name__ == "__main__":
    main()
