"""Speed benchmark of the robust aggregators, beside ByzFL's implementations of the same rules.

    python -m studies.bench_aggregators --n 16 64 --d 1000000 --repeats 7

For each n, f = (n-3)//4 (so every rule's precondition holds, Bulyan's included) and the inputs are
float32 N(0, 1) rows. Each rule is timed as the median of ``--repeats`` calls after one warm-up. Where
the ``byzfl`` package is importable (a benchmark-only dependency), its implementation of the same rule
runs on the same data in the same process; ratio = ByzFL time / our time (above 1: ours is faster).
``agree`` compares both results where the conventions coincide (see NOTES); ``n/a`` where they differ.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
from tabulate import tabulate

from pytest_dmlbench.robust import aggregate
from pytest_dmlbench.robust.pre import PRE_AGGREGATIONS

# n = 64, d = 10^6 float32 targets on the project's 2-core reference machine, in ms
TARGETS_MS = {"mean": 50.0, "median": 400.0, "trimmed_mean": 400.0, "krum": 300.0, "geometric_median": 1500.0}
NOTES = {
    "krum": "ByzFL scores n-f-1 neighbours: compared with ours at f-1",
    "multi_krum": "ByzFL scores n-f-1 neighbours: compared with ours at f-1, m=n-f",
    "bulyan": "ByzFL 0.0.11 has no Bulyan",
    "geometric_median": "ByzFL: 3 Weiszfeld steps from 0, nu=0.1; ours: to tolerance from the mean",
    "centered_clipping": "both from centre 0 with tau=100, one iteration (ByzFL's defaults)",
    "bucketing": "random permutations differ: timing only",
    "nnm": "ByzFL materialises an (n, n-f, d) tensor: skipped above --byzfl-max-gb",
}


@dataclass
class Case:
    name: str
    ours: Callable[[torch.Tensor], torch.Tensor]
    byzfl: Callable[[torch.Tensor], Any] | None
    # our call with ByzFL's convention, when one exists (None: conventions differ, timing only)
    comparable: Callable[[torch.Tensor], torch.Tensor] | None


def time_ms(fn: Callable[[torch.Tensor], Any], x: torch.Tensor, repeats: int) -> float:
    """Median wall time of ``fn(x)`` over ``repeats`` calls after one warm-up call, in ms."""
    fn(x)
    samples = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn(x)
        samples.append((time.perf_counter() - start) * 1e3)
    return statistics.median(samples)


RULES = ["mean", "median", "trimmed_mean", "meamed", "krum", "multi_krum", "bulyan", "geometric_median",
         "centered_clipping", "nnm", "bucketing", "clip"]


def byzfl_rules(f: int) -> dict[str, Callable[[torch.Tensor], Any]]:
    try:
        import byzfl
    except ImportError:
        return {}
    return {
        "mean": byzfl.Average(),
        "median": byzfl.Median(),
        "trimmed_mean": byzfl.TrMean(f=f),
        "meamed": byzfl.Meamed(f=f),
        "krum": byzfl.Krum(f=f),
        "multi_krum": byzfl.MultiKrum(f=f),
        "geometric_median": byzfl.GeometricMedian(),
        "centered_clipping": lambda x: byzfl.CenteredClipping(tau=100.0)(x),
        "nnm": byzfl.NNM(f=f),
        "bucketing": byzfl.Bucketing(s=2),
        # ByzFL's Clipping rescales the rows of its input in place: give it a copy
        "clip": lambda x: byzfl.Clipping(c=2.0)(x.clone()),
    }


def our_rule(name: str, f: int) -> Callable[[torch.Tensor], torch.Tensor]:
    if name in PRE_AGGREGATIONS:
        params = {"c": 2.0} if name == "clip" else {}
        return lambda x: PRE_AGGREGATIONS[name](x, f=f, **params)
    if name == "centered_clipping":
        return lambda x: aggregate(name, x, f=f, tau=100.0, center=torch.zeros(x.shape[1], dtype=x.dtype))
    return lambda x: aggregate(name, x, f=f)


def cases(f: int, n: int) -> list[Case]:
    theirs = byzfl_rules(f)
    out = []
    for name in RULES:
        ours = our_rule(name, f)
        comparable: Callable[[torch.Tensor], torch.Tensor] | None = ours
        if name == "krum":
            comparable = lambda x: aggregate("krum", x, f=f - 1)  # noqa: E731
        elif name == "multi_krum":
            comparable = lambda x: aggregate("multi_krum", x, f=f - 1, m=n - f)  # noqa: E731
        elif name in ("geometric_median", "bucketing", "bulyan"):
            comparable = None
        out.append(Case(name, ours, theirs.get(name), comparable))
    return out


def agree(case: Case, x: torch.Tensor, theirs: Any) -> str:
    """'yes' when both results match to 1e-4 relative; else how many coordinates differ (float32
    rounding decides near-ties of a selection differently, e.g. values equally close to the median)."""
    if case.comparable is None:
        return "n/a"
    reference = case.comparable(x).double()
    other = torch.as_tensor(theirs).double()
    if other.shape != reference.shape:
        return f"shape {tuple(other.shape)} vs {tuple(reference.shape)}"
    scale = float(reference.abs().max()) + 1e-12
    differ = (other - reference).abs() > 1e-4 * scale
    if not bool(differ.any()):
        return "yes"
    return f"{int(differ.sum())}/{differ.numel()} entries differ"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--n", type=int, nargs="+", default=[16, 64], help="numbers of inputs (rows)")
    parser.add_argument("--d", type=int, default=1_000_000, help="dimension of each input")
    parser.add_argument("--repeats", type=int, default=7, help="timed calls per rule (median reported)")
    parser.add_argument("--rules", nargs="*", help="only these rules")
    parser.add_argument("--no-byzfl", action="store_true", help="do not time ByzFL even if installed")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--byzfl-max-gb", type=float, default=2.0,
                        help="skip ByzFL's NNM when its (n, n-f, d) float32 temporary exceeds this")
    args = parser.parse_args(argv)
    if any(n < 3 for n in args.n) or args.d < 1 or args.repeats < 1:
        parser.error("need every n >= 3, d >= 1 and repeats >= 1")

    rows = []
    for n in args.n:
        f = max(0, (n - 3) // 4)
        x = torch.randn(n, args.d, generator=torch.Generator().manual_seed(args.seed))
        for case in cases(f, n):
            if args.rules and case.name not in args.rules:
                continue
            ours_ms = time_ms(case.ours, x, args.repeats)
            byz_ms: float | None = None
            status = "n/a"
            nnm_gb = n * (n - f) * args.d * 4 / 1e9
            if case.name == "nnm" and nnm_gb > args.byzfl_max_gb:
                status = f"ByzFL skipped: needs {nnm_gb:.1f} GB"
            elif case.byzfl is not None and not args.no_byzfl:
                try:
                    theirs = case.byzfl(x)
                    byz_ms = time_ms(case.byzfl, x, args.repeats)
                    status = agree(case, x, theirs)
                except RuntimeError as error:  # e.g. torch.quantile's input-size limit
                    status = f"ByzFL failed: {str(error).splitlines()[0][:60]}"
            target = TARGETS_MS.get(case.name) if n == 64 and args.d == 1_000_000 else None
            rows.append([
                n, f, case.name, f"{ours_ms:.1f}",
                "" if byz_ms is None else f"{byz_ms:.1f}",
                "" if byz_ms is None else f"{byz_ms / ours_ms:.2f}",
                "" if target is None else f"{target:.0f} {'ok' if ours_ms < target else 'MISSED'}",
                status, NOTES.get(case.name, ""),
            ])
            print(*rows[-1][:8], sep="\t", flush=True)
    print()
    print(f"d = {args.d}, float32, median of {args.repeats} calls, torch {torch.__version__}, "
          f"{torch.get_num_threads()} threads")
    print(tabulate(rows, headers=["n", "f", "rule", "ours ms", "ByzFL ms", "ratio", "target ms", "agree",
                                  "note"]))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
