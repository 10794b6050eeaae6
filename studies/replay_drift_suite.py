"""Whole-suite nightly histories through the history store and the drift report: how many case-metrics an
unchanged suite gets flagged in, and whether one case creeping 3 % a night over 5 nights is found among them.

    python -m studies.replay_drift_suite TEMPLATE.json [AA.json ...] [--histories 10] [--nights 30] [--sigma 3]

TEMPLATE is a nightly results file: its case-metrics (every judged figure with a positive median) are the
suite. Each replayed night multiplies every median by its own noise draw: Gaussian on the log scale with sd
``--sigma`` percent, or, when AA files (paired A/A nights) are given, a draw from their recorded per-night
A/B log ratios (``studies/replay_drift.py``). Every night is written with :func:`append_night` into a temporary
history folder and judged with :func:`load_history` and :func:`analyse`, the code ``drift report`` runs.
In the creeping histories one case's ``step_time_s`` (drawn at random) gets slower by ``--step`` percent a
night over the last 5 nights, its throughput correspondingly lower.
"""

from __future__ import annotations

import argparse
import math
import random
import sys
import tempfile
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

from pytest_dmlbench.drift.findings import analyse
from pytest_dmlbench.drift.history import Night, append_night, load_history, night_from_results
from pytest_dmlbench.results.jsonio import read_results
from studies.replay_drift import recorded_log_ratios

Noise = Callable[[random.Random], float]
CREEP_NIGHTS = 5


def replayed_history(template: Night, nights: int, noise: Noise, rng: random.Random, case: str | None,
                     step: float) -> tuple[int, bool, int]:
    """Judged case-metrics, whether ``case`` was flagged on a creeping night, other case-metrics flagged."""
    flat = nights - CREEP_NIGHTS
    with tempfile.TemporaryDirectory(prefix="drift-suite-") as folder:
        for index in range(nights):
            slower = (1.0 + step) ** max(0, index - flat + 1) if case is not None else 1.0
            points = {}
            for key, point in template.points.items():
                factor = math.exp(noise(rng))
                if key[0] == case and key[1] in ("step_time_s", "throughput_samples_per_s"):
                    factor *= slower if point.better == "lower" else 1.0 / slower
                points[key] = replace(point, median=point.median * factor)
            append_night(Path(folder), Night(f"{index + 1:040x}", f"2026-10-{index + 1:02d}T03:17:00+00:00",
                                             points=points))
        report = analyse(load_history(Path(folder)))
    flagged = {(f.case, f.metric) for f in report.regressions}
    caught = any(f.case == case and f.finding.after >= flat for f in report.regressions)
    return report.judged, caught, len({key for key in flagged if key[0] != case})


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("template", type=Path, help="a nightly results file: its case-metrics are the suite")
    parser.add_argument("aa", nargs="*", type=Path, help="paired A/A results files: recorded night noise")
    parser.add_argument("--histories", type=int, default=10, help="suite histories per condition")
    parser.add_argument("--nights", type=int, default=30)
    parser.add_argument("--sigma", type=float, default=3.0, help="Gaussian night noise, percent (without AA)")
    parser.add_argument("--step", type=float, default=3.0, help="creep per night, percent")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    rng = random.Random(args.seed)
    template = night_from_results(read_results(args.template, "Give a results file written by --dmlbench-json."))
    if args.aa:
        pool = recorded_log_ratios(args.aa)
        noise: Noise = lambda r: r.choice(pool)  # noqa: E731
        label = f"recorded A/A night ratios ({len(pool)} figures)"
    else:
        sd = args.sigma / 100.0
        noise = lambda r: r.gauss(0.0, sd)  # noqa: E731
        label = f"Gaussian sd {args.sigma:g} %"
    cases = sorted({case for case, metric in template.points if metric == "step_time_s"})
    print(f"{len(template.points)} case-metrics of {args.template}, {args.nights} nights, noise: {label}")
    flagged: list[int] = []
    judged = 0
    for _ in range(args.histories):
        judged, _, count = replayed_history(template, args.nights, noise, rng, None, 0.0)
        flagged.append(count)
    print(f"unchanged suite: case-metrics flagged per {args.nights}-night history: {sorted(flagged)} of {judged} "
          f"judged ({100 * sum(flagged) / (judged * args.histories):.2f} % of series)")
    caught, beside = 0, []
    for _ in range(args.histories):
        _, hit, count = replayed_history(template, args.nights, noise, rng, rng.choice(cases), args.step / 100.0)
        caught += hit
        beside.append(count)
    print(f"one case creeping {args.step:g} % a night over {CREEP_NIGHTS} nights (judged 0 nights after the last): "
          f"found in {caught} of {args.histories} histories; other case-metrics flagged beside it: {sorted(beside)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
