"""Do the two block servers keep an offset for as long as they serve a case? Estimated from recorded A/A nights.

    python -m studies.server_offset studies/recordings/night*-aa-ws4-2026-11-27.json.gz [--min-pairs 8]
    python -m studies.server_offset studies/recordings/night*-aa-ws4-2026-11-27.json.gz --max-noise 15  # less noise

(``--figure step_time_s`` picks the figure.)

On unchanged code a case's log ratio A/B, pair by pair, is noise around zero, plus, if the two servers run the
case at different speeds for as long as they serve it (where their ranks landed, how their memory was laid
out), an offset of that case in that run. Noise is independent between the first and the second half of a
case's pairs; an offset is shared by both. So across a run's cases the covariance of the two halves' means
estimates the offset's variance (zero without one), and its square root is the offset's spread in percent.
Across runs, the covariance of a case's means says whether an offset belongs to the case (its code and files,
the same every night) rather than to one run's servers (drawn afresh each time the servers start, so that a
confirmation stage on freshly started servers would draw it again).

Per run it also counts the cases whose mean log ratio lies beyond 2 and 3 standard errors (|t|, a one-sample t
over the case's pairs) against the count the t distribution gives with no offset at all (each case's degrees of
freedom): offsets that differ from case to case, which no correlation across cases would show, raise the count.

Prints, per run and pooled, the half-split correlation with its 95 % interval and the offset's spread with a
bootstrap 95 % upper bound; per pair of runs, the correlation of the cases' means and the persistent offset's
spread. A gate's threshold must clear the offset by a margin, so this is the floor it puts under a threshold.
"""

from __future__ import annotations

import argparse
import math
import random
import statistics
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import combinations
from pathlib import Path

from pytest_dmlbench.gates.paired.recorded import load_recorded
from pytest_dmlbench.results.student_t import student_t_sf

BOOTSTRAP = 2000


@dataclass(frozen=True)
class Offset:
    """What the means of paired halves (or of two runs) say about an offset shared by both."""

    cases: int
    correlation: float
    correlation_ci: tuple[float, float]  # 95 %, Fisher's z
    spread_pct: float  # sqrt of the covariance (0 when it is negative), in percent of the figure
    spread_upper_pct: float  # bootstrap 95 % upper bound over cases

    def text(self) -> str:
        low, high = self.correlation_ci
        return (f"{self.cases} cases: correlation {self.correlation:+.3f} [95 % CI {low:+.3f}, {high:+.3f}]; "
                f"offset spread {self.spread_pct:.2f} % (95 % upper bound {self.spread_upper_pct:.2f} %)")


def case_logs(path: Path, figure: str, min_pairs: int, max_noise_pct: float = math.inf) -> dict[str, list[float]]:
    """Per case of one results file: the log ratios A/B of ``figure``, pair by pair, over all its stages (the
    same two servers served them); cases with fewer than ``min_pairs`` usable pairs, or a per-pair noise (sd of
    the log ratios) above ``max_noise_pct``, are left out."""
    logs = {}
    for nodeid, case in load_recorded([path]).items():
        values = [math.log(a[figure] / b[figure]) for run in case.runs for a, b in run
                  if a.get(figure, 0) > 0 and b.get(figure, 0) > 0]
        if len(values) >= min_pairs and 100 * statistics.stdev(values) <= max_noise_pct:
            logs[nodeid] = values
    return logs


def _covariance(pairs: Sequence[tuple[float, float]]) -> float:
    return statistics.covariance([x for x, _ in pairs], [y for _, y in pairs])


def shared_offset(pairs: Sequence[tuple[float, float]], rng: random.Random) -> Offset:
    """The offset two sets of means share, one ``(x, y)`` per case (log ratios)."""
    if len(pairs) < 4:
        raise ValueError(f"need at least 4 cases, got {len(pairs)}")
    xs, ys = [x for x, _ in pairs], [y for _, y in pairs]
    r = statistics.correlation(xs, ys) if statistics.pstdev(xs) and statistics.pstdev(ys) else 0.0
    z, half = math.atanh(max(-0.999999, min(0.999999, r))), 1.96 / math.sqrt(len(pairs) - 3)
    covariances = sorted(_covariance([rng.choice(pairs) for _ in pairs]) for _ in range(BOOTSTRAP))
    upper = covariances[int(0.95 * BOOTSTRAP)]
    return Offset(len(pairs), r, (math.tanh(z - half), math.tanh(z + half)),
                  100 * math.sqrt(max(0.0, _covariance(pairs))), 100 * math.sqrt(max(0.0, upper)))


def halves(logs: dict[str, list[float]]) -> list[tuple[float, float]]:
    """Per case, the mean log ratio of its first and of its second half of pairs (an odd middle pair left out)."""
    out = []
    for values in logs.values():
        half = len(values) // 2
        out.append((statistics.fmean(values[:half]), statistics.fmean(values[len(values) - half:])))
    return out


def beyond(logs: dict[str, list[float]], cut: float) -> tuple[int, float]:
    """How many cases' mean log ratio lies more than ``cut`` standard errors from zero, and how many the t
    distribution gives when every case is noise around zero (cases whose pairs all read alike left out)."""
    seen, expected = 0, 0.0
    for values in logs.values():
        sd = statistics.stdev(values)
        if sd > 0.0:
            seen += abs(statistics.fmean(values)) > cut * sd / math.sqrt(len(values))
            expected += 2.0 * student_t_sf(cut, len(values) - 1)
    return seen, expected


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("results", nargs="+", type=Path, help="results files of paired A/A runs (.json or .json.gz)")
    parser.add_argument("--figure", default="step_time_s", help="a figure judged on its ratio (default step_time_s)")
    parser.add_argument("--min-pairs", type=int, default=8, help="cases with fewer pairs are left out (default 8)")
    parser.add_argument("--max-noise", type=float, default=math.inf, metavar="PCT",
                        help="leave out cases whose per-pair noise is above PCT percent (default: none left out)")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    if args.min_pairs < 4:
        parser.error(f"--min-pairs {args.min_pairs}: give 4 or more (two halves of at least 2 pairs)")
    rng = random.Random(args.seed)
    try:
        runs = {path.name: case_logs(path, args.figure, args.min_pairs, args.max_noise) for path in args.results}
    except ValueError as exc:
        print(f"server_offset: {exc}", file=sys.stderr)
        return 2
    noise = "" if math.isinf(args.max_noise) else f" and per-pair noise up to {args.max_noise:g} %"
    print(f"{args.figure}, cases with at least {args.min_pairs} pairs{noise}; within a run (first half against "
          "second):")
    pooled: list[tuple[float, float]] = []
    for name, logs in runs.items():
        split = halves(logs)
        pooled += split
        print(f"  {name}: " + (shared_offset(split, rng).text() if len(split) >= 4 else f"{len(split)} cases, too few"))
        counts = [(cut, *beyond(logs, cut)) for cut in (2.0, 3.0)]
        print("    " + "; ".join(f"beyond {cut:g} standard errors: {seen} (the t distribution gives {expected:.1f})"
                                 for cut, seen, expected in counts))
    if len(pooled) >= 4 and len(runs) > 1:
        print(f"  pooled: {shared_offset(pooled, rng).text()}")
    if len(runs) > 1:
        print("across runs (a case's mean in one run against its mean in the other):")
    for (one, first), (other, second) in combinations(runs.items(), 2):
        common = sorted(set(first) & set(second))
        means = [(statistics.fmean(first[k]), statistics.fmean(second[k])) for k in common]
        print(f"  {one} / {other}: " + (shared_offset(means, rng).text() if len(means) >= 4
                                        else f"{len(means)} common cases, too few"))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
