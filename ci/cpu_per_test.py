"""CPU time per test of the test command, counted over every process a test starts: where the work goes, which
wall time cannot say on a CPU-bound 2-core host (a test's wall time there is mostly what the other worker's tests
took from it).

As a pytest plugin (``-p ci.cpu_per_test --cpu-per-test FILE``), each test process (each pytest-xdist worker, or
the one process without xdist) moves itself into a cgroup of its own under the cgroup-v1 CPU accounting
controller, so its inner pytest runs, the fork server, rank processes and Ray's processes, all started below it,
are counted there; around each test it reads the cgroup's CPU time and appends one JSON line to FILE. A process a
test left running (a Ray instance still shutting down) is counted to the worker's next test. Needs a writable
``/sys/fs/cgroup/cpuacct`` (root, cgroup v1); where there is none, the run stops with a usage error.

    python -m pytest -n 2 --dist loadscope tests -p ci.cpu_per_test --cpu-per-test cpu.jsonl
    python ci/cpu_per_test.py cpu.jsonl --top 30      # the tests and the files that used the most CPU
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

ACCOUNTING = Path("/sys/fs/cgroup/cpuacct")


class CpuGroup:
    """A cgroup of its own for this process and everything it starts; ``used_s()`` is their CPU time so far."""

    def __init__(self, root: Path = ACCOUNTING) -> None:
        self.folder = root / f"dmlbench-test-cpu-{os.getpid()}"
        try:
            self.folder.mkdir(exist_ok=True)
            (self.folder / "cgroup.procs").write_text(str(os.getpid()))
        except OSError as exc:
            raise RuntimeError(f"--cpu-per-test needs a writable cgroup-v1 CPU accounting controller at {root} "
                               f"(root on a cgroup-v1 host): {exc}") from exc

    def used_s(self) -> float:
        return int((self.folder / "cpuacct.usage").read_text()) / 1e9

    def leave(self) -> None:
        """Move this process back to the controller's root and remove the cgroup (left where a process it started
        still runs)."""
        (self.folder.parent / "cgroup.procs").write_text(str(os.getpid()))
        try:
            self.folder.rmdir()
        except OSError:
            pass  # a process started below this one still runs there; the cgroup goes with the machine


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--cpu-per-test", metavar="FILE", default=None,
                     help="append each test's CPU time (every process it started) to FILE as JSON lines")


def pytest_configure(config: pytest.Config) -> None:
    path = config.getoption("--cpu-per-test")
    if path is None or (getattr(config, "workerinput", None) is None and config.getoption("numprocesses", None)):
        return  # the xdist controller runs no test: its workers count
    try:
        group = CpuGroup()
    except RuntimeError as exc:
        raise pytest.UsageError(str(exc)) from exc
    config.pluginmanager.register(Recorder(group, Path(path)), "cpu-per-test-recorder")


def pytest_unconfigure(config: pytest.Config) -> None:
    recorder = config.pluginmanager.get_plugin("cpu-per-test-recorder")
    if isinstance(recorder, Recorder):
        recorder.group.leave()


class Recorder:
    """Appends ``{"nodeid", "cpu_s", "wall_s", "worker"}`` per test to a file the workers share."""

    def __init__(self, group: CpuGroup, path: Path) -> None:
        self.group = group
        self.path = path

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_protocol(self, item: Any, nextitem: Any) -> Iterator[None]:
        cpu, wall = self.group.used_s(), time.monotonic()
        yield
        row = {"nodeid": item.nodeid, "cpu_s": round(self.group.used_s() - cpu, 3),
               "wall_s": round(time.monotonic() - wall, 3), "worker": os.environ.get("PYTEST_XDIST_WORKER", "")}
        with self.path.open("a") as out:
            out.write(json.dumps(row) + "\n")


def read_rows(path: Path) -> list[dict[str, Any]]:
    """The recorded rows; a line that is not a row (a run cut short mid-write) is named."""
    rows = []
    for number, line in enumerate(path.read_text().splitlines(), 1):
        try:
            row = json.loads(line)
            rows.append({"nodeid": str(row["nodeid"]), "cpu_s": float(row["cpu_s"]), "wall_s": float(row["wall_s"])})
        except (ValueError, KeyError, TypeError) as exc:
            raise ValueError(f"{path}:{number}: not a row of --cpu-per-test ({exc}): {line[:80]!r}") from exc
    return rows


def summary(rows: list[dict[str, Any]], top: int) -> str:
    """The CPU time in all, then the ``top`` tests and the ``top`` files that used the most."""
    total = sum(r["cpu_s"] for r in rows)
    lines = [f"{len(rows)} tests, {total:.0f} s of CPU in all"]
    lines.append(f"the {top} tests that used the most CPU (s of CPU, s of wall time, share of all):")
    for row in sorted(rows, key=lambda r: -r["cpu_s"])[:top]:
        lines.append(f"  {row['cpu_s']:8.1f} {row['wall_s']:8.1f} {row['cpu_s'] / total:6.1%}  {row['nodeid']}")
    by_file: Counter[str] = Counter()
    for row in rows:
        by_file[row["nodeid"].split("::")[0]] += row["cpu_s"]
    lines.append(f"the {top} files that used the most CPU:")
    for name, cpu in by_file.most_common(top):
        lines.append(f"  {cpu:8.1f} {cpu / total:6.1%}  {name}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("rows", type=Path, help="the file --cpu-per-test wrote")
    parser.add_argument("--top", type=int, default=30, help="how many tests and files to list (30)")
    args = parser.parse_args(argv)
    try:
        print(summary(read_rows(args.rows), args.top))
    except (OSError, ValueError) as exc:
        print(f"cpu_per_test: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
