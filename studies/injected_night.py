"""A live nightly with a slowdown injected into shipped cases: does the night catch them, by which figure, and
does nothing else turn red?

Clones this repository's HEAD into a scratch folder and commits, on top of it, a change that slows the named
cases of ``bench_cases/`` (``studies/injected_slowdown.py``: each timed call followed by extra work, ``counted``
matrix products, the same number after every call, as many as ``--share`` of the call's thread CPU time on this
host (calibrated first by one plain run of the slowed cases at world size 4 that reads their calls), or
``elementwise`` additions the flop counter does not count, ``--share`` of each call's own thread CPU time). Then runs
``ci/nightly.sh`` there against ``HEAD~1`` (the same code without the slowdown), with the nightly's defaults
unless ``--env NAME=VALUE`` overrides them, and reads its results file: for every slowed case each figure's verdict
and which figure failed it; for every other case, whether it failed (red for nothing).

    python -m studies.injected_night --slow "bench_cases/test_training_benchmarks.py::test_strategy_training[ddp]"
    python -m studies.injected_night --how counted --share 0.05 --out night.json \\
        --slow "bench_cases/test_training_benchmarks.py::test_strategy_training[ddp]" \\
        --slow "bench_cases/test_training_benchmarks.py::test_model_parallel_training[fsdp]"
    python -m studies.injected_night --select "test_strategy_training" --slow ...   # a subset of the suite
    python -m studies.injected_night --summarize night.json

A slowed case must time its steps through ``dmlbench(fn)``, ``dmlbench.pedantic`` or ``dmlbench.train``.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shlex
import shutil
import subprocess
import tempfile
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

from studies.injected_slowdown import HOWS
from studies.scratch_repo import commit_all, git

ROOT = Path(__file__).resolve().parents[1]
NODE = re.compile(r"^(?P<path>bench_cases/[\w/]+\.py)::(?P<function>\w+)(?:\[(?P<id>[^\]]+)\])?$")
# the figures printed per slowed case: time and the work counters
SHOWN = ("step_time_s", "cpu_time_s", "flops_per_step", "collective_calls_per_step", "comm_bytes_per_step")
INJECTED = ("\n\n# A slowdown injected for a live night (studies/injected_night.py); not part of the suite.\n"
            "from studies.injected_slowdown import slowed as _injected_slowed  # noqa: E402\n")


def parse_node(nodeid: str) -> tuple[str, str, str]:
    """``(path, function, id)`` of a case's node id under ``bench_cases/`` (id ``""`` when not parametrized)."""
    match = NODE.match(nodeid)
    if match is None:
        raise ValueError(f"--slow {nodeid!r}: give a case's node id under bench_cases/, as in "
                         "'bench_cases/test_training_benchmarks.py::test_strategy_training[ddp]'")
    return match["path"], match["function"], match["id"] or ""


def injection(nodeids: list[str], how: str, share: float,
              units: dict[str, int] | None = None) -> dict[str, str]:
    """The lines appended to each benchmark module to slow ``nodeids`` (``units``: each node id's calibrated units
    of counted work per call): ``{path: text}``."""
    wanted: dict[tuple[str, str], list[str]] = defaultdict(list)
    for nodeid in nodeids:
        path, function, ident = parse_node(nodeid)
        wanted[(path, function)].append(ident)
    texts: dict[str, str] = {}
    for (path, function), ids in wanted.items():
        sized = "" if units is None else (
            f", units={ {ident: units[f'{path}::{function}[{ident}]'] for ident in sorted(ids)}!r}")
        texts[path] = texts.get(path, INJECTED) + (
            f"{function} = _injected_slowed({function}, {sorted(ids)!r}, {how!r}, {share!r}{sized})\n")
    return texts


def inject(folder: Path, texts: dict[str, str]) -> None:
    for path, text in texts.items():
        module = folder / path
        if not module.is_file():
            raise ValueError(f"--slow names {path}, which the clone in {folder} does not have")
        module.write_text(module.read_text() + text)


def calibrate(folder: Path, nodeids: list[str], share: float, world_size: int = 4) -> dict[str, int]:
    """Each node id's units of counted work per call for a ``share`` slowdown on this host: one plain run of the cases
    (``pytest --dmlbench --world-size 4``, the nightly's) in ``folder`` with their calls read, the clone left as it
    was."""
    from studies.injected_slowdown import CALIBRATION_ENV, calibrated_units

    inject(folder, injection(nodeids, "calibrate", share))
    readings = folder.parent / "calibration.jsonl"
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}
    env |= {"PYTHONPATH": str(folder), CALIBRATION_ENV: str(readings)}
    try:
        done = subprocess.run(["python", "-m", "pytest", "--dmlbench", "--world-size", str(world_size), "-q",
                               "-p", "no:randomly", *nodeids], cwd=folder, env=env, capture_output=True, text=True,
                              check=False)
    finally:
        git(folder, "checkout", "--", ".")
    if done.returncode != 0:
        raise RuntimeError(f"the calibrating run of {', '.join(nodeids)} failed (exit {done.returncode}):\n"
                           f"{(done.stdout + done.stderr)[-3000:]}")
    by_id = calibrated_units((json.loads(line) for line in readings.read_text().splitlines()), share)
    units = {}
    for nodeid in nodeids:
        key = os.path.basename(nodeid)  # test_steps.py::test_step[ddp], as the calibrating run names it
        if key not in by_id:
            raise RuntimeError(f"the calibrating run read no timed call of {nodeid} (it read {sorted(by_id)})")
        units[nodeid] = by_id[key]
    return units


def slowed_clone(source: Path, folder: Path, nodeids: list[str], how: str, share: float) -> tuple[Path, dict[str, int]]:
    """A clone of ``source``'s HEAD in ``folder`` with one commit on top that slows ``nodeids``; ``folder`` and, for
    ``counted`` work, each node id's calibrated units per call (:func:`calibrate`)."""
    git(folder.parent, "clone", "-q", str(source), str(folder))
    units = calibrate(folder, nodeids, share) if how == "counted" else None
    inject(folder, injection(nodeids, how, share, units))
    commit_all(folder, f"injected: {', '.join(nodeids)} {how} {share:.0%} slower")
    return folder, units or {}


def _decided_by(case: dict[str, Any]) -> list[str]:
    return sorted(v["metric"] for v in case["verdicts"] if v["kind"] in ("regression", "improvement"))


def summarize_results(document: dict[str, Any], nodeids: list[str]) -> dict[str, Any]:
    """What the night made of the slowed cases and of the rest, from its results file."""
    cases = document["cases"]
    slowed: dict[str, Any] = {}
    for nodeid in nodeids:
        case = next((c for c in cases if c["nodeid"] == nodeid), None)
        if case is None:
            slowed[nodeid] = {"ran": False}
            continue
        verdicts = {v["metric"]: {"kind": v["kind"], "ratio": v.get("ratio"),
                                  "estimate": (v.get("paired") or {}).get("estimate")} for v in case["verdicts"]}
        slowed[nodeid] = {"ran": True, "outcome": case["outcome"], "caught": case["outcome"] == "failed",
                          "decided_by": _decided_by(case), "verdicts": verdicts}
    others = [c for c in cases if c["nodeid"] not in nodeids]
    kinds: dict[str, int] = defaultdict(int)
    for case in cases:
        for verdict in case["verdicts"]:
            kinds[verdict["kind"]] += 1
    return {"slowed": slowed, "cases": len(cases),
            "red_for_nothing": sorted(c["nodeid"] for c in others if c["outcome"] == "failed"),
            "verdict_kinds": dict(kinds)}


def run_night(clone: Path, out: Path, env_overrides: dict[str, str], select: str | None,
              timeout: float) -> tuple[int, float]:
    """``ci/nightly.sh`` in ``clone`` against ``HEAD~1``, its files under ``out``: exit code and wall seconds."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}
    env |= {"PYTHONPATH": str(clone), "DMLBENCH_AGAINST": "HEAD~1", "DMLBENCH_HISTORY": str(out / "history")}
    if select:
        env["PYTEST_ADDOPTS"] = f"-k {shlex.quote(select)}"
    env |= env_overrides
    begin = time.monotonic()
    with (out / "nightly.log").open("w") as log:
        done = subprocess.run(["bash", "ci/nightly.sh", str(out / "results.json"), str(out / "junit.xml"),
                               str(out / "report")], cwd=clone, env=env, stdout=log, stderr=subprocess.STDOUT,
                              timeout=timeout, check=False)
    return done.returncode, time.monotonic() - begin


def print_summary(report: dict[str, Any]) -> None:
    night = report["night"]
    print(f"night: exit {report['exit']}, {report['wall_s'] / 60:.1f} min, {night['cases']} cases; "
          f"verdicts {dict(sorted(night['verdict_kinds'].items()))}")
    caught = [n for n, s in night["slowed"].items() if s.get("caught")]
    print(f"slowed {report['how']} {report['share']:.0%}: {len(caught)} of {len(night['slowed'])} caught")
    for nodeid, found in night["slowed"].items():
        if not found["ran"]:
            print(f"  {nodeid}: did not run")
            continue
        figures = ", ".join(f"{m} {v['kind']}" + (f" {v['estimate']:.3f}" if v["estimate"] is not None else "")
                            for m, v in sorted(found["verdicts"].items()) if m in SHOWN)
        print(f"  {nodeid}: {found['outcome']}; failed by {', '.join(found['decided_by']) or 'nothing'}; {figures}")
    print(f"red for nothing: {', '.join(night['red_for_nothing']) or 'none'}")



def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--slow", action="append", default=[], metavar="NODEID",
                        help="a case to slow (repeatable): its node id under bench_cases/")
    parser.add_argument("--how", choices=HOWS, default="elementwise")
    parser.add_argument("--share", type=float, default=0.05, help="extra work per timed call (default 0.05: 5 %%)")
    parser.add_argument("--select", metavar="EXPR", help="run only the cases pytest's -k EXPR selects")
    parser.add_argument("--env", action="append", default=[], metavar="NAME=VALUE",
                        help="a nightly setting (repeatable), e.g. --env DMLBENCH_THRESHOLD=5")
    parser.add_argument("--keep", type=Path, metavar="DIR", help="keep the night's files (results, log, report)")
    parser.add_argument("--timeout", type=float, default=4 * 3600)
    parser.add_argument("--out", type=Path, default=Path("injected_night.json").resolve())
    parser.add_argument("--summarize", type=Path, metavar="JSON", help="only print a JSON this script wrote")
    args = parser.parse_args(argv)
    if args.summarize is not None:
        print_summary(json.loads(args.summarize.read_text()))
        return 0
    if not args.slow:
        parser.error("give at least one --slow NODEID")
    if not 0 < args.share < 1:
        parser.error(f"--share {args.share}: give a fraction between 0 and 1 (0.05 is 5 % more work)")
    overrides = {}
    for item in args.env:
        name, sep, value = item.partition("=")
        if not sep or not name.startswith("DMLBENCH_"):
            parser.error(f"--env {item!r}: give NAME=VALUE with a DMLBENCH_ name of ci/nightly.sh")
        overrides[name] = value
    try:
        for nodeid in args.slow:
            parse_node(nodeid)
    except ValueError as exc:
        parser.error(str(exc))
    with tempfile.TemporaryDirectory(prefix="dmlbench-injected-") as name:
        tmp = Path(name)
        clone, units = slowed_clone(ROOT, tmp / "repo", args.slow, args.how, args.share)
        files = tmp / "night"
        files.mkdir()
        rc, wall = run_night(clone, files, overrides, args.select, args.timeout)
        if args.keep is not None:
            shutil.copytree(files, args.keep, dirs_exist_ok=True)
        results = files / "results.json"
        if not results.exists():
            print((files / "nightly.log").read_text()[-3000:])
            print(f"injected_night: the night wrote no results (exit {rc})")
            return 1
        night = summarize_results(json.loads(results.read_text()), args.slow)
    report = {"slow": args.slow, "how": args.how, "share": args.share, "units": units, "select": args.select,
              "env": overrides,
              "exit": rc, "wall_s": wall, "head": git(ROOT, "rev-parse", "HEAD"), "night": night}
    args.out.write_text(json.dumps(report, indent=1))
    print_summary(report)
    print(f"written {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
