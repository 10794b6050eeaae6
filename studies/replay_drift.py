"""Replay nightly histories through the drift detector: false flags when nothing changed, and how often a
slowdown arriving 3 % a night over 5 nights is flagged.

    python -m studies.replay_drift [--series 1000] [--nights 30] [--sigmas 2,3,5] [RESULTS.json ...]

Each replayed history is one case-metric's nightly figure: ``--nights`` unchanged nights, or unchanged
nights followed by the creep (``--step`` percent a night over ``--creep-nights`` nights, then held), judged
by :func:`pytest_dmlbench.drift.detect.detect` with its default settings on the night the last slowdown
lands and ``--later`` nights after. A creep counts as caught when a regression or creep finding's new level
starts on a creeping night; an unchanged history counts as a false flag when anything is flagged.

Night-to-night noise: Gaussian on the log scale with each sd of ``--sigmas`` (percent), and, when RESULTS
files of paired A/A nights are given (``ci/nightly.sh`` on a comment-only change), draws from their recorded
per-night A/B log ratios of every timed figure (the geometric mean of a case's block pairs): the night
error of a paired figure on this machine, heavy tails included.
"""

from __future__ import annotations

import argparse
import math
import random
import statistics
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

from pytest_dmlbench.drift.detect import DriftSettings, detect
from pytest_dmlbench.drift.history import paired_ratio
from pytest_dmlbench.gates.figures import SINGLE_READING_METRICS
from pytest_dmlbench.results.jsonio import read_results

Noise = Callable[[random.Random], float]


def recorded_log_ratios(paths: Sequence[Path]) -> list[float]:
    """Every timed figure's A/B log ratio in the paired results files ``paths``."""
    found: list[float] = []
    for path in paths:
        run = read_results(path, "Give results files of paired A/A nights (--dmlbench-json).")
        for case in run.cases:
            for name, metric in case.metrics.items():
                ratio = paired_ratio(case.extra, name)
                if metric.better is not None and name not in SINGLE_READING_METRICS and ratio is not None:
                    found.append(math.log(ratio))
    if not found:
        raise ValueError(f"no paired block pairs of a timed figure in {', '.join(map(str, paths))}")
    return found


def gaussian(sd: float) -> Noise:
    return lambda rng: rng.gauss(0.0, sd)


def history(rng: random.Random, noise: Noise, flat: int, step: float, creep: int, later: int) -> list[float]:
    levels = [1.0] * flat + [(1.0 + step) ** k for k in range(1, creep + 1)] + [(1.0 + step) ** creep] * later
    return [level * math.exp(noise(rng)) for level in levels]


def rates(noise: Noise, args: argparse.Namespace, rng: random.Random) -> tuple[float, list[float]]:
    """False-flag rate on unchanged histories; detection rate at each of ``args.later`` nights after."""
    settings = DriftSettings()
    step = args.step / 100.0
    false = sum(bool(detect(history(rng, noise, args.nights, step, 0, 0), "lower", settings).regressions)
                for _ in range(args.series))
    flat = args.nights - args.creep_nights
    caught = []
    for later in args.later:
        hits = 0
        for _ in range(args.series):
            found = detect(history(rng, noise, flat, step, args.creep_nights, later), "lower", settings).regressions
            hits += any(f.after >= flat for f in found)
        caught.append(hits / args.series)
    return false / args.series, caught


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("results", nargs="*", type=Path, help="results files of paired A/A nights (optional)")
    parser.add_argument("--series", type=int, default=1000, help="histories per condition")
    parser.add_argument("--nights", type=int, default=30, help="nights in a history (creep ones included)")
    parser.add_argument("--sigmas", default="2,3,5", help="Gaussian night-to-night sd, percent, comma-separated")
    parser.add_argument("--step", type=float, default=3.0, help="creep per night, percent")
    parser.add_argument("--creep-nights", type=int, default=5)
    parser.add_argument("--later", type=int, nargs="+", default=[0, 2, 5],
                        help="judge on the night the last slowdown lands and these many nights later")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    rng = random.Random(args.seed)
    noises = [(f"Gaussian sd {pct:g} %", gaussian(pct / 100.0))
              for pct in (float(s) for s in args.sigmas.split(",") if s.strip())]
    if args.results:
        try:
            pool = recorded_log_ratios(args.results)
        except ValueError as exc:
            print(f"replay_drift: {exc}", file=sys.stderr)
            return 2
        centre = statistics.median(pool)
        spread = statistics.median(abs(x - centre) for x in pool) * 1.4826
        noises.append((f"recorded A/A night ratios ({len(pool)} figures, robust sd {100 * spread:.1f} %)",
                       lambda r: r.choice(pool)))
    settings = DriftSettings()
    print(f"{args.series} histories per condition, {args.nights} nights; creep {args.step:g} % a night over "
          f"{args.creep_nights} nights; detector defaults: threshold {settings.threshold_pct:g} %, penalty "
          f"{settings.penalty:g} x ln(nights), z {settings.z:g}, noise floor {100 * settings.noise_floor:g} %, "
          f"levels of at least {settings.min_segment} nights")
    header = " | ".join(f"caught {n} night(s) later" if n else "caught when the 5th lands" for n in args.later)
    print(f"| noise | false flags (unchanged) | {header} |")
    print("|---|---|" + "---|" * len(args.later))
    for label, noise in noises:
        false, caught = rates(noise, args, rng)
        print(f"| {label} | {100 * false:.1f} % | " + " | ".join(f"{100 * c:.1f} %" for c in caught) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
