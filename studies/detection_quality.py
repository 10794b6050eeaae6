"""Detection quality of the regression rule on this machine, beside pytest-benchmark's ``median:10%``.

A real workload (a small MLP training step with torch, one thread) is timed in many runs of ROUNDS rounds,
in pairs taken one after another: an unchanged run and a run whose every step is followed by extra busy
work lasting 15 % of the step's median duration (calibrated once before recording), in random order.
Each pair is compared with a baseline made of the SAVES unchanged runs before it, saved one after another
exactly as ``--dmlbench-save`` does (so the newest carries the medians of the others as its history).

* false regressions: the unchanged run vs the baseline, over every compared metric (step time and
  throughput);
* detection: the slowed run vs the baseline, step-time metric flagged as a regression;

each counted for three rules on the same samples: ours with the baseline saved SAVES times (median beyond
the threshold AND a one-sided t-test on block medians of rounds p < alpha AND outside the saved runs'
prediction interval),
ours with a baseline saved once (the newest of those runs; the first two conditions only), and
pytest-benchmark's ``--benchmark-compare-fail=median:10%`` (median(current) / median(baseline) - 1 > 10 %).

Each figure is computed for several round counts from the same runs (the first R rounds of each run), so
the script also shows how many rounds per run the plugin needs. Usage::

    python -m studies.detection_quality             # default: 600 pairs, 5 saves, up to 40 rounds; about 1 minute
    python -m studies.detection_quality --pairs 100 # quicker, coarser

Exit status 0 when some round count meets both targets (<= 1 % false, >= 95 % detected) with the
wall-clock step time and the repeatedly saved baseline.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

from pytest_dmlbench.gates.stored.compare import compare_metric
from pytest_dmlbench.gates.stored.history import carried_history
from pytest_dmlbench.results import MetricResult

BATCH = 64
FALSE_TARGET = 0.01
DETECT_TARGET = 0.95


def make_step(width: int, depth: int) -> Callable[[], None]:
    """One SGD training step of a small MLP on a fixed batch (real forward, backward and update)."""
    import torch

    torch.manual_seed(0)
    layers: list[torch.nn.Module] = []
    for _ in range(depth):
        layers += [torch.nn.Linear(width, width), torch.nn.ReLU()]
    model = torch.nn.Sequential(*layers, torch.nn.Linear(width, 10))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    inputs, targets = torch.randn(BATCH, width), torch.randint(0, 10, (BATCH,))
    loss_fn = torch.nn.CrossEntropyLoss()

    def step() -> None:
        optimizer.zero_grad(set_to_none=True)
        loss_fn(model(inputs), targets).backward()
        optimizer.step()

    return step


def busy_cpu(seconds: float) -> None:
    """Extra CPU work: spin until this thread has used ``seconds`` more CPU time (as slower code would)."""
    end = time.thread_time() + seconds
    while time.thread_time() < end:
        pass


def calibrate(step: Callable[[], None], steps: int = 200) -> float:
    """Median CPU time of the unchanged step, measured before recording."""
    durations = []
    for _ in range(steps):
        start = time.thread_time()
        step()
        durations.append(time.thread_time() - start)
    return statistics.median(durations)


def make_reference() -> Callable[[], None]:
    """A fixed reference kernel (a chain of small matrix products) that no code change touches."""
    import torch

    matrix = torch.randn(192, 192)

    def reference() -> None:
        x = matrix
        for _ in range(8):
            x = torch.mm(x, matrix).clamp_(-1.0, 1.0)

    return reference


@dataclass
class Run:
    """Per-round wall-clock and thread-CPU times of one run, and the step time divided by the wall time
    of the reference kernel run right after it in the same round (empty unless ``--reference``)."""

    wall: list[float]
    cpu: list[float]
    normalized: list[float]


def timed_run(
    step: Callable[[], None],
    rounds: int,
    extra_cpu_s: float,
    warmup: int,
    reference: Callable[[], None] | None = None,
) -> Run:
    """Time ``rounds`` steps, each followed by ``extra_cpu_s`` of extra CPU work."""
    for _ in range(warmup):
        step()
    run = Run([], [], [])
    for _ in range(rounds):
        wall, cpu = time.perf_counter(), time.thread_time()
        step()
        if extra_cpu_s:
            busy_cpu(extra_cpu_s)
        run.cpu.append(time.thread_time() - cpu)
        run.wall.append(time.perf_counter() - wall)
        if reference is not None:
            start = time.perf_counter()
            reference()
            run.normalized.append(run.wall[-1] / (time.perf_counter() - start))
    return run


@dataclass
class Pair:
    unchanged: Run
    slowed: Run


def record(
    pairs: int, rounds: int, slowdown: float, warmup: int, seed: int, width: int, use_reference: bool
) -> list[Pair]:
    step = make_step(width, depth=3)
    reference = make_reference() if use_reference else None
    extra_s = slowdown * calibrate(step)
    rng = random.Random(seed)
    recorded = []
    for index in range(pairs):
        if rng.random() < 0.5:
            unchanged = timed_run(step, rounds, 0.0, warmup, reference)
            slowed = timed_run(step, rounds, extra_s, warmup, reference)
        else:
            slowed = timed_run(step, rounds, extra_s, warmup, reference)
            unchanged = timed_run(step, rounds, 0.0, warmup, reference)
        recorded.append(Pair(unchanged, slowed))
        if (index + 1) % 100 == 0:
            print(f"  recorded {index + 1}/{pairs} pairs", file=sys.stderr, flush=True)
    return recorded


def metrics(samples: Sequence[float]) -> list[MetricResult]:
    return [
        MetricResult.of("step_time_s", samples),
        MetricResult.of("throughput_samples_per_s", [BATCH / s for s in samples]),
    ]


def saved_baseline(saves: list[Run], clock: str, rounds: int, threshold: float, alpha: float) -> list[MetricResult]:
    """The baseline metrics after saving each run in turn (history carried as ``--dmlbench-save`` does)."""
    stored: list[MetricResult] | None = None
    for run in saves:
        current = metrics(getattr(run, clock)[:rounds])
        for index, metric in enumerate(current):
            previous = stored[index] if stored is not None else None
            metric.history = carried_history(previous, metric, threshold, alpha)
        stored = current
    assert stored is not None
    return stored


def flags(base: MetricResult, current: MetricResult, threshold: float, alpha: float) -> bool:
    verdict = compare_metric(base, current, threshold, alpha)
    return verdict is not None and verdict.kind == "regression"


def median_rule_flags(base: MetricResult, current: MetricResult, threshold: float) -> bool:
    """pytest-benchmark's ``--benchmark-compare-fail=median:10%`` on the same samples."""
    ratio = statistics.median(current.samples) / statistics.median(base.samples)
    if base.better == "higher":  # pytest-benchmark compares times; a throughput drop is a time rise
        ratio = 1.0 / ratio
    return ratio - 1.0 > threshold / 100.0


RULES = ("saved", "once", "median")
RULE_TITLES = {
    "saved": "ours, baseline saved {saves}x",
    "once": "ours, saved once",
    "median": "median:10%",
}


@dataclass
class Rates:
    rounds: int
    comparisons: int = 0
    trials: int = 0
    false: dict[str, int] = field(default_factory=lambda: dict.fromkeys(RULES, 0))
    detected: dict[str, int] = field(default_factory=lambda: dict.fromkeys(RULES, 0))
    slowdown_median: float = 0.0

    def meets_targets(self, rule: str) -> bool:
        return (
            self.false[rule] <= FALSE_TARGET * self.comparisons
            and self.detected[rule] >= DETECT_TARGET * self.trials
        )


def evaluate(pairs: list[Pair], saves: int, clock: str, rounds: int, threshold: float, alpha: float) -> Rates:
    rates = Rates(rounds, trials=len(pairs) - saves)
    ratios = []
    for index in range(saves, len(pairs)):
        earlier = [pair.unchanged for pair in pairs[index - saves:index]]
        saved = saved_baseline(earlier, clock, rounds, threshold, alpha)
        once = metrics(getattr(earlier[-1], clock)[:rounds])
        unchanged = metrics(getattr(pairs[index].unchanged, clock)[:rounds])
        slow_step = metrics(getattr(pairs[index].slowed, clock)[:rounds])[0]
        for index, current in enumerate(unchanged):
            rates.comparisons += 1
            rates.false["saved"] += flags(saved[index], current, threshold, alpha)
            rates.false["once"] += flags(once[index], current, threshold, alpha)
            rates.false["median"] += median_rule_flags(once[index], current, threshold)
        rates.detected["saved"] += flags(saved[0], slow_step, threshold, alpha)
        rates.detected["once"] += flags(once[0], slow_step, threshold, alpha)
        rates.detected["median"] += median_rule_flags(once[0], slow_step, threshold)
        ratios.append(statistics.median(slow_step.samples) / statistics.median(once[0].samples))
    rates.slowdown_median = statistics.median(ratios) - 1.0
    return rates


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--pairs", type=int, default=600, help="(unchanged, slowed) run pairs")
    parser.add_argument("--saves", type=int, default=5, help="earlier unchanged runs saved as the baseline")
    parser.add_argument("--rounds", type=int, nargs="+", default=[10, 20, 30, 40])
    parser.add_argument("--slowdown", type=float, default=0.15, help="injected extra work per step")
    parser.add_argument("--threshold", type=float, default=10.0, help="regression threshold, percent")
    parser.add_argument("--alpha", type=float, default=0.01)
    parser.add_argument("--warmup", type=int, default=3, help="untimed steps before each run")
    parser.add_argument("--width", type=int, default=256, help="MLP width (sets the step time)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--reference",
        action="store_true",
        help="also time a fixed reference kernel each round and evaluate step time / reference time",
    )
    parser.add_argument("--samples-json", metavar="PATH", help="also write every recorded sample to PATH")
    args = parser.parse_args(argv)
    if not 1 <= args.saves < args.pairs:
        parser.error("--saves must be at least 1 and below --pairs")

    import torch

    torch.set_num_threads(1)
    started = time.perf_counter()
    print(
        f"recording {args.pairs} pairs of runs x {max(args.rounds)} rounds "
        f"(torch {torch.__version__}, 1 thread)",
        file=sys.stderr,
        flush=True,
    )
    pairs = record(
        args.pairs, max(args.rounds), args.slowdown, args.warmup, args.seed, args.width, args.reference
    )
    print(
        f"\nworkload: MLP {args.width}x3, batch {BATCH}, 1 thread; {len(pairs)} pairs of an unchanged run and "
        f"a run with injected extra CPU work of {args.slowdown:.0%} of the median step, each compared with "
        f"the unchanged runs before it; threshold {args.threshold:g}%, alpha {args.alpha:g}; recorded in "
        f"{time.perf_counter() - started:.0f} s"
    )
    if args.samples_json:
        Path(args.samples_json).write_text(json.dumps([asdict(p) for p in pairs]))
    verdicts = {}
    clocks = [
        ("wall", "wall-clock step time (what step_time_s measures)"),
        ("cpu", "thread CPU time of the step (excludes time other processes hold the CPU)"),
    ]
    if args.reference:
        clocks.append(
            ("normalized", "step wall time / wall time of a fixed reference kernel in the same round")
        )
    for clock, title in clocks:
        median = statistics.median(s for p in pairs for s in getattr(p.unchanged, clock))
        print(
            f"\n{title}: median "
            + (f"{median:.3f}" if clock == "normalized" else f"step {median * 1e3:.2f} ms")
        )
        verdicts[clock] = print_table(pairs, clock, sorted(args.rounds), args)
    return 0 if verdicts["wall"] else 1


def print_table(pairs: list[Pair], clock: str, rounds_list: list[int], args: argparse.Namespace) -> bool:
    titles = {rule: RULE_TITLES[rule].format(saves=args.saves) for rule in RULES}
    header = f"{'rounds':>6} | " + " | ".join(f"{titles[r] + ': false / detected':>44}" for r in RULES)
    header += f" | {'observed slowdown':>17}"
    print(header)
    print("-" * len(header))
    results = []
    for rounds in rounds_list:
        r = evaluate(pairs, args.saves, clock, rounds, args.threshold, args.alpha)
        results.append(r)
        cells = [
            f"{r.false[rule]:>4}/{r.comparisons:<4} {r.false[rule] / r.comparisons:>6.1%} / "
            f"{r.detected[rule]:>4}/{r.trials:<4} {r.detected[rule] / r.trials:>6.1%}"
            for rule in RULES
        ]
        print(f"{rounds:>6} | " + " | ".join(f"{c:>44}" for c in cells) + f" | {r.slowdown_median:>+16.1%}")
    targets = f"<= {FALSE_TARGET:.0%} false regressions, >= {DETECT_TARGET:.0%} detected"
    for rule in RULES:
        meeting = [r.rounds for r in results if r.meets_targets(rule)]
        found = f"smallest round count {meeting[0]}" if meeting else "no round count"
        print(f"{titles[rule]}: {found} meets both targets ({targets})")
    return any(r.meets_targets("saved") for r in results)


if __name__ == "__main__":
    raise SystemExit(main())
