"""Detection quality of the regression rule on this machine, beside pytest-benchmark's ``median:10%``.

A real workload (a small MLP training step with torch, one thread) is timed in many runs of ROUNDS rounds.
Runs come in triples taken one after another: a baseline run, an unchanged run and a run whose every
step is followed by extra busy work lasting 15 % of the step's median duration (calibrated once before
recording), the last two in random order.

* false regressions: unchanged run vs its baseline, over every compared metric (step time and
  throughput), counted for our rule (median beyond the threshold AND one-sided Mann-Whitney U p < alpha)
  and for pytest-benchmark's rule (fail when median(current) / median(baseline) - 1 > 10 %);
* detection: slowed run vs its baseline, step-time metric flagged as a regression.

Each figure is computed for several round counts from the same runs (the first R rounds of each run), so
the script also shows how many rounds per run the plugin needs. Usage::

    python ci/detection_quality.py               # default: 300 triples of 40 rounds, a few minutes
    python ci/detection_quality.py --triples 50  # quicker, coarser

Exit status 0 when the recommended round count meets both targets (<= 1 % false, >= 95 % detected).
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from pytest_dmlbench.baseline.compare import compare_metric
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
class Triple:
    baseline: Run
    unchanged: Run
    slowed: Run


def record(
    triples: int, rounds: int, slowdown: float, warmup: int, seed: int, width: int, use_reference: bool
) -> list[Triple]:
    step = make_step(width, depth=3)
    reference = make_reference() if use_reference else None
    extra_s = slowdown * calibrate(step)
    rng = random.Random(seed)
    recorded = []
    for index in range(triples):
        baseline = timed_run(step, rounds, 0.0, warmup, reference)
        if rng.random() < 0.5:
            unchanged = timed_run(step, rounds, 0.0, warmup, reference)
            slowed = timed_run(step, rounds, extra_s, warmup, reference)
        else:
            slowed = timed_run(step, rounds, extra_s, warmup, reference)
            unchanged = timed_run(step, rounds, 0.0, warmup, reference)
        recorded.append(Triple(baseline, unchanged, slowed))
        if (index + 1) % 50 == 0:
            print(f"  recorded {index + 1}/{triples} triples", file=sys.stderr, flush=True)
    return recorded


def metrics(samples: Sequence[float]) -> list[MetricResult]:
    return [
        MetricResult.of("step_time_s", samples),
        MetricResult.of("throughput_samples_per_s", [BATCH / s for s in samples]),
    ]


def ours_flags(base: MetricResult, current: MetricResult, threshold: float, alpha: float) -> bool:
    verdict = compare_metric(base, current, threshold, alpha)
    return verdict is not None and verdict.kind == "regression"


def median_rule_flags(base: MetricResult, current: MetricResult, threshold: float) -> bool:
    """pytest-benchmark's ``--benchmark-compare-fail=median:10%`` on the same samples."""
    ratio = statistics.median(current.samples) / statistics.median(base.samples)
    if base.better == "higher":  # pytest-benchmark compares times; a throughput drop is a time rise
        ratio = 1.0 / ratio
    return ratio - 1.0 > threshold / 100.0


@dataclass
class Rates:
    rounds: int
    comparisons: int
    ours_false: int
    ours_detected: int
    median_rule_false: int
    median_rule_detected: int
    slowdown_median: float

    def ours_ok(self, triples: int) -> bool:
        return (
            self.ours_false <= FALSE_TARGET * self.comparisons
            and self.ours_detected >= DETECT_TARGET * triples
        )


def evaluate(triples: list[Triple], clock: str, rounds: int, threshold: float, alpha: float) -> Rates:
    rates = Rates(rounds, 0, 0, 0, 0, 0, 0.0)
    ratios = []
    for triple in triples:
        base = metrics(getattr(triple.baseline, clock)[:rounds])
        for b, u in zip(base, metrics(getattr(triple.unchanged, clock)[:rounds]), strict=True):
            rates.comparisons += 1
            rates.ours_false += ours_flags(b, u, threshold, alpha)
            rates.median_rule_false += median_rule_flags(b, u, threshold)
        slow_step = metrics(getattr(triple.slowed, clock)[:rounds])[0]
        rates.ours_detected += ours_flags(base[0], slow_step, threshold, alpha)
        rates.median_rule_detected += median_rule_flags(base[0], slow_step, threshold)
        ratios.append(statistics.median(slow_step.samples) / statistics.median(base[0].samples))
    rates.slowdown_median = statistics.median(ratios) - 1.0
    return rates


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--triples", type=int, default=200, help="baseline/unchanged/slowed run triples")
    parser.add_argument("--rounds", type=int, nargs="+", default=[5, 10, 20, 30, 40])
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

    import torch

    torch.set_num_threads(1)
    started = time.perf_counter()
    print(
        f"recording {args.triples} triples x {max(args.rounds)} rounds (torch {torch.__version__}, 1 thread)",
        file=sys.stderr,
        flush=True,
    )
    triples = record(
        args.triples, max(args.rounds), args.slowdown, args.warmup, args.seed, args.width, args.reference
    )
    n = len(triples)
    print(
        f"\nworkload: MLP {args.width}x3, batch {BATCH}, 1 thread; {n} triples; injected extra CPU work "
        f"{args.slowdown:.0%} of the median step; threshold {args.threshold:g}%, alpha {args.alpha:g}; "
        f"recorded in {time.perf_counter() - started:.0f} s"
    )
    if args.samples_json:
        Path(args.samples_json).write_text(json.dumps([asdict(t) for t in triples]))
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
        median = statistics.median(s for t in triples for s in getattr(t.baseline, clock))
        print(
            f"\n{title}: median "
            + (f"{median:.3f}" if clock == "normalized" else f"step {median * 1e3:.2f} ms")
        )
        verdicts[clock] = print_table(triples, clock, sorted(args.rounds), args.threshold, args.alpha)
    return 0 if verdicts["wall"] else 1


def print_table(
    triples: list[Triple], clock: str, rounds_list: list[int], threshold: float, alpha: float
) -> bool:
    n = len(triples)
    header = (
        f"{'rounds':>6} | {'ours: false reg.':>18} | {'ours: detected':>16} | "
        f"{'median:10%: false':>18} | {'median:10%: detected':>20} | {'observed slowdown':>17}"
    )
    print(header)
    print("-" * len(header))
    results = []
    for rounds in rounds_list:
        r = evaluate(triples, clock, rounds, threshold, alpha)
        results.append(r)
        print(
            f"{rounds:>6} | {r.ours_false:>4}/{r.comparisons:<4} {r.ours_false / r.comparisons:>6.1%} | "
            f"{r.ours_detected:>4}/{n:<4} {r.ours_detected / n:>6.1%} | "
            f"{r.median_rule_false:>4}/{r.comparisons:<4} {r.median_rule_false / r.comparisons:>6.1%} | "
            f"{r.median_rule_detected:>6}/{n:<4} {r.median_rule_detected / n:>8.1%} | "
            f"{r.slowdown_median:>+16.1%}"
        )
    meeting = [r for r in results if r.ours_ok(n)]
    targets = f"<= {FALSE_TARGET:.0%} false regressions, >= {DETECT_TARGET:.0%} detected"
    if meeting:
        print(f"smallest round count meeting both targets ({targets}): {meeting[0].rounds}")
        return True
    print(f"no round count met both targets ({targets})")
    return False


if __name__ == "__main__":
    raise SystemExit(main())
