"""What simulated ranks' strict mode costs (issue 44): the same case with strict mode off and on, in pairs (the
order within each pair drawn at random, so a slow phase of the machine falls on both), at 64, 256 and 1024
ranks; per case and size the median seconds of each and the median of the per-pair ratios, and the median CPU
seconds of the process over each run.

    python -m studies.strict_cost                                # every case at 64, 256 and 1024 ranks, 3 pairs
    python -m studies.strict_cost --ranks 64 256 --pairs 5 --cases ddp

Cases: ``ddp``, the DDP equivalence case of ``bench_cases/test_simulated_equivalence.py`` (model, scatter of
the data, three steps, the checks after each); ``ddp_build``, its DDP model built and no more (DDP's own
collectives from C++: the parameters' shapes checked and broadcast); ``ring``, ten rounds of each rank sending
to the next and receiving from the previous (even ranks send first), point-to-point matching; ``async``, ten
rounds of eight ``async_op=True`` all-reduces waited for together (the poison, the staging and the watch over reads);
``blocking``, ten rounds of a blocking all-gather of one element a rank and an all-reduce of 16 (calls waited for
at once, which strict mode neither stages nor watches); ``fsdp``, FSDP2's strict check of the same file
(``check_fsdp``: two steps, one sample a rank, the gathered parameters checked against single-process SGD after
each), whose collectives come from C++ and DTensor and stay pending in strict mode.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
from collections.abc import Callable
from pathlib import Path
from typing import Any

SIZES = (64, 256, 1024)


def ddp_case(info: Any) -> None:
    from bench_cases import test_simulated_equivalence as suite

    strategy, reference = suite.build_pair("ddp", "mlp", 0.9)
    suite.check_at_scale(strategy, "mlp", reference)


def ddp_build_case(info: Any) -> None:
    from bench_cases import test_simulated_equivalence as suite

    suite.build_pair("ddp", "mlp", 0.9)


def fsdp_case(info: Any) -> None:
    from bench_cases import test_simulated_equivalence as suite

    suite.check_fsdp(info.world_size)


def ring_case(info: Any) -> None:
    import torch
    import torch.distributed as dist

    rank, size = dist.get_rank(), dist.get_world_size()
    mine, got = torch.full((16,), float(rank)), torch.empty(16)
    for _ in range(10):
        if rank % 2 == 0:
            dist.send(mine, (rank + 1) % size)
            dist.recv(got, (rank - 1) % size)
        else:
            dist.recv(got, (rank - 1) % size)
            dist.send(mine, (rank + 1) % size)
        assert got[0].item() == (rank - 1) % size


def async_case(info: Any) -> None:
    import torch
    import torch.distributed as dist

    tensors = [torch.ones(64) for _ in range(8)]
    for _ in range(10):
        works = [dist.all_reduce(t, async_op=True) for t in tensors]
        for work in works:
            work.wait()
        for tensor in tensors:
            tensor.fill_(1.0)


def blocking_case(info: Any) -> None:
    import torch
    import torch.distributed as dist

    gathered = [torch.zeros(1) for _ in range(dist.get_world_size())]
    for _ in range(10):
        dist.all_gather(gathered, torch.ones(1))
        dist.all_reduce(torch.ones(16))


CASES: dict[str, Callable[[Any], None]] = {"ddp": ddp_case, "ddp_build": ddp_build_case, "ring": ring_case,
                                           "async": async_case, "blocking": blocking_case, "fsdp": fsdp_case}


def run_once(case: Callable[[Any], None], ranks: int, *, strict: bool) -> tuple[float, float]:
    """Seconds of one run of ``case`` on ``ranks`` simulated ranks (world start and end included), and the CPU
    seconds of the process over it (every rank is a thread of it: the figure a loaded machine disturbs least)."""
    from pytest_dmlbench.measure import clock
    from pytest_dmlbench.world.failure import failure_text
    from pytest_dmlbench.world.simulated.runner import SimulatedCase

    begin, cpu_begin = clock.now(), clock.cpu_now(whole_process=True)
    outcome = SimulatedCase(1, case, lambda info: {"info": info}, world_size=ranks, seed=0, timeout_s=3600,
                            strict=strict).run()
    seconds, cpu_seconds = clock.now() - begin, clock.cpu_now(whole_process=True) - cpu_begin
    if not outcome.passed:
        raise SystemExit(f"{case.__name__} at {ranks} ranks (strict {strict}) did not pass:\n"
                         + failure_text(outcome, ranks, "simulated"))
    return seconds, cpu_seconds


def measure(cases: list[str], sizes: list[int], pairs: int, seed: int) -> list[dict[str, Any]]:
    draw = random.Random(seed)
    rows = []
    for name in cases:
        for ranks in sizes:
            runs: dict[bool, list[tuple[float, float]]] = {False: [], True: []}
            for _ in range(pairs):
                order = [False, True]
                draw.shuffle(order)
                for strict in order:
                    runs[strict].append(run_once(CASES[name], ranks, strict=strict))
            off, on = [wall for wall, _ in runs[False]], [wall for wall, _ in runs[True]]
            ratios = [b / a for a, b in zip(off, on, strict=True)]
            rows.append({"case": name, "ranks": ranks, "pairs": pairs, "off_s": statistics.median(off),
                         "on_s": statistics.median(on), "ratio": statistics.median(ratios),
                         "ratio_range": [min(ratios), max(ratios)],
                         "off_cpu_s": statistics.median(cpu for _, cpu in runs[False]),
                         "on_cpu_s": statistics.median(cpu for _, cpu in runs[True])})
            print(_line(rows[-1]), flush=True)
    return rows


def _line(row: dict[str, Any]) -> str:
    low, high = row["ratio_range"]
    return (f"| {row['case']} | {row['ranks']} | {row['off_s']:.2f} | {row['on_s']:.2f} | {row['ratio']:.2f} "
            f"({low:.2f}-{high:.2f}) | {row['off_cpu_s']:.2f} | {row['on_cpu_s']:.2f} |")


def main(argv: list[str] | None = None) -> list[dict[str, Any]]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--ranks", type=int, nargs="+", default=list(SIZES), help="world sizes (default 64 256 1024)")
    parser.add_argument("--pairs", type=int, default=3, help="off/on pairs per case and size (default 3)")
    parser.add_argument("--cases", default=",".join(CASES), help=f"comma-separated, of {', '.join(CASES)}")
    parser.add_argument("--seed", type=int, default=0, help="seed of the order within each pair")
    parser.add_argument("--json", type=Path, help="also write the rows to this file")
    args = parser.parse_args(argv)
    cases = [c.strip() for c in args.cases.split(",") if c.strip()]
    unknown = sorted(set(cases) - set(CASES))
    if unknown or args.pairs < 1 or min(args.ranks) < 2:
        parser.error(f"cases must be among {', '.join(CASES)} (got {', '.join(unknown) or 'them'}), --pairs >= 1 "
                     "and every --ranks >= 2")
    print("| case | ranks | strict off (s, median) | strict on (s, median) | on/off (median of pairs, range) "
          "| CPU s off (median) | CPU s on (median) |")
    print("|---|---|---|---|---|---|---|")
    rows = measure(cases, args.ranks, args.pairs, args.seed)
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))
    return rows


if __name__ == "__main__":
    main()
