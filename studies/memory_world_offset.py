"""How far apart two worlds running the same code read a memory peak: the A/A offset the paired gate allows for.

    python -m studies.memory_world_offset [RESULTS.json.gz ...] [--metric peak_rss_mb]

RESULTS are whole-suite paired runs on unchanged code (default: every recording in ``studies/recordings/``). In such
a run each side keeps one world per case, so a memory peak's two medians (REF's and the working tree's, over
their blocks) differ by that pair of worlds' offset alone. Printed per file: how many readings, the smallest
and largest offset, the spread and the 95th percentile of its size; then the largest over all files, the
figure ``gates/paired/memory_peaks.py`` allows for (``WORLD_OFFSET_PCT``).
"""

from __future__ import annotations

import argparse
import math
import statistics
import sys
from pathlib import Path

from pytest_dmlbench.gates.paired.recorded import read_results_file

RECORDINGS = Path(__file__).resolve().parent / "recordings"


def offsets(path: Path, metric: str) -> list[float]:
    """Per case of one results file, the log offset of the working tree's median over REF's, in percent."""
    document = read_results_file(path)
    found = []
    for case in document.get("cases", []):
        for verdict in case.get("verdicts", []):
            a, b = verdict.get("current_median"), verdict.get("baseline_median")
            if verdict.get("metric") == metric and a and b and a > 0 and b > 0:
                found.append(100.0 * (math.exp(abs(math.log(a / b))) - 1.0) * (1 if a >= b else -1))
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("results", nargs="*", type=Path)
    parser.add_argument("--metric", default="peak_rss_mb")
    args = parser.parse_args(argv)
    paths = args.results or sorted(RECORDINGS.glob("*.json*"))
    every: list[float] = []
    for path in paths:
        try:
            found = offsets(path, args.metric)
        except ValueError as exc:
            print(f"memory_world_offset: {exc}", file=sys.stderr)
            return 2
        if not found:
            print(f"{path.name}: no {args.metric} verdict with both medians")
            continue
        sizes = sorted(abs(x) for x in found)
        print(f"{path.name}: {len(found)} readings, offset {min(found):+.1f} % to {max(found):+.1f} %, spread "
              f"{statistics.stdev(found) if len(found) > 1 else 0.0:.1f} %, 95th percentile of its size "
              f"{sizes[int(0.95 * (len(sizes) - 1))]:.1f} %")
        every += found
    if not every:
        print(f"memory_world_offset: no {args.metric} readings in {len(paths)} file(s)", file=sys.stderr)
        return 2
    print(f"largest A/A offset of {args.metric} between two sides' worlds: {max(abs(x) for x in every):.1f} % over "
          f"{len(every)} readings of {len(paths)} file(s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
