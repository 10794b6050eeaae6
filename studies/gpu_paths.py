"""Every GPU path of the plugin in one run, with a short report: which ran, which passed, which could not run.

On a host with CUDA devices it runs two pytest sessions on NCCL (``--dmlbench-backend nccl``), one rank per device
(``--ranks``, default every device up to 8):

- generated cases: ``set_device`` per rank (rank r on ``cuda:r``), the NCCL collectives' values (all_reduce,
  all_gather, reduce_scatter, broadcast), their bus bandwidth (``dmlbench.collective``, 64 MB), ``peak_cuda_mb``
  of a case that holds 64 MiB on the GPU, and the max-batch-size search catching real CUDA out-of-memory errors;
- the float64 equivalence cases on the MLP (``bench_cases/test_equivalence.py -k "float64 and mlp"``) at world
  sizes 1 and 2.

Paths between 2+ ranks need 2+ devices; with one device they are reported as not run, with the reason. Without a
CUDA device nothing runs: the report says so and the exit status is 2. Exit 1 when a path failed, else 0.

    python -m studies.gpu_paths                      # every device, at most 8 ranks, within 540 s
    python -m studies.gpu_paths --ranks 2 --keep out # 2 ranks; the cases, results and pytest output kept in out/
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
MAX_RANKS = 8
PEAK_MB = (64 << 20) / 1e6  # the 64 MiB tensor the peak case holds, in MB (1e6 B)
PEAK_CASE = "test_peak_cuda_mb"

CASES = '''
import pytest, torch, torch.distributed as td
from pytest_dmlbench.sweeps import max_batch_size


@pytest.mark.dmlbench
def test_set_device_per_rank(dist):
    assert dist.backend == "nccl", dist.backend
    assert dist.device == f"cuda:{dist.rank}", dist.device
    assert torch.cuda.current_device() == dist.rank, torch.cuda.current_device()
    seen = [None] * dist.world_size
    td.all_gather_object(seen, torch.cuda.current_device())
    assert seen == list(range(dist.world_size)), seen


@pytest.mark.dmlbench
def test_nccl_collectives(dist):
    n, r, device = dist.world_size, dist.rank, dist.device
    x = torch.full((1024,), float(r + 1), device=device)
    td.all_reduce(x)
    assert torch.all(x == n * (n + 1) / 2), x[:4]
    gathered = torch.empty(4 * n, device=device)
    td.all_gather_into_tensor(gathered, torch.full((4,), float(r), device=device))
    assert gathered.tolist() == [float(i) for i in range(n) for _ in range(4)], gathered
    scattered = torch.empty(4, device=device)
    td.reduce_scatter_tensor(scattered, torch.ones(4 * n, device=device))
    assert torch.all(scattered == n), scattered
    b = torch.full((8,), float(r), device=device)
    td.broadcast(b, src=0)
    assert torch.all(b == 0), b


@pytest.mark.dmlbench
@pytest.mark.parametrize("op", ["all_reduce", "all_gather", "reduce_scatter", "broadcast"])
def test_nccl_busbw(dist, dmlbench, op):
    dmlbench.collective(op, 64 << 20)


@pytest.mark.dmlbench
def test_peak_cuda_mb(dist, dmlbench):
    x = torch.ones(16 << 20, device=dist.device)  # 64 MiB of float32
    dmlbench(torch.add, x, 1.0)


class _HoldPerSample(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, floats):
        ctx.save_for_backward(torch.ones(x.shape[0], floats, device=x.device))
        return x.clone()

    @staticmethod
    def backward(ctx, grad):
        return grad, None


class OneGBPerSample(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = torch.nn.Linear(4, 2)

    def forward(self, x):
        return self.linear(_HoldPerSample.apply(x, 250_000_000))  # 1 GB a sample, held until backward


@pytest.mark.dmlbench
def test_cuda_oom_search(dist):
    free, _ = torch.cuda.mem_get_info(dist.device)
    found = max_batch_size(OneGBPerSample(), (torch.zeros(4), torch.tensor(1)), device=dist.device)
    assert 0.8 * free / 1e9 <= found <= free / 1e9, (found, free / 1e9)
    assert torch.cuda.memory_allocated(dist.device) < 1e9  # the search gave back what it allocated
'''


@dataclass(frozen=True)
class GpuPath:
    """One GPU path: its name in the report, the cases that run it and the ranks it needs."""

    name: str
    match: str
    min_ranks: int


PATHS = (
    GpuPath("set_device per rank", "test_set_device_per_rank", 1),
    GpuPath("NCCL collectives between 2+ ranks", "test_nccl_collectives", 2),
    GpuPath("NCCL bus bandwidth (busbw_gbps)", "test_nccl_busbw", 2),
    GpuPath("peak_cuda_mb", PEAK_CASE, 1),
    GpuPath("CUDA out-of-memory search", "test_cuda_oom_search", 1),
    GpuPath("equivalence on NCCL (float64 MLP)", "test_matches_single_process_reference_float64", 1),
)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--ranks", type=int, default=None,
                        help=f"ranks of the NCCL world, one device each (default: every device, at most {MAX_RANKS})")
    parser.add_argument("--timeout-s", type=float, default=540.0,
                        help="time for both pytest sessions together (default 540: the run ends within 10 minutes)")
    parser.add_argument("--keep", type=Path, default=None, help="keep the cases, results and pytest output here")
    args = parser.parse_args(argv)
    if args.ranks is not None and args.ranks < 1:
        parser.error(f"--ranks {args.ranks}: give 1 or more ranks (one CUDA device each)")
    if not 0 < args.timeout_s <= 600:
        parser.error(f"--timeout-s {args.timeout_s:g}: give more than 0 and at most 600 s (the run's 10 minutes)")
    return args


def world_size(ranks: int | None, devices: int) -> tuple[int, str | None]:
    """The NCCL world's size, or 0 and why no world can start."""
    if devices == 0:
        return 0, "no CUDA device on this host (torch.cuda.device_count() is 0)"
    wanted = min(devices, MAX_RANKS) if ranks is None else ranks
    if wanted > devices:
        return 0, f"--ranks {wanted} needs {wanted} CUDA devices, this host has {devices}"
    return wanted, None


def path_lines(cases: list[dict[str, Any]], ranks: int, why_not: str | None) -> list[str]:
    """One line a path: ran and passed (with its figures), failed (naming the cases), or not run and why."""
    lines = []
    for path in PATHS:
        mine = [c for c in cases if path.match in c["nodeid"]]
        if why_not is not None:
            lines.append(f"  not run  {path.name}: {why_not}")
        elif ranks < path.min_ranks:
            lines.append(f"  not run  {path.name}: needs {path.min_ranks} ranks on {path.min_ranks} CUDA devices, "
                         f"ran with {ranks}")
        elif not mine:
            lines.append(f"  FAILED   {path.name}: no case recorded (the session did not reach it; see its output)")
        else:
            said = summary(mine)
            status = "FAILED " if "FAILED" in said else verdict(mine)
            lines.append(f"  {status}  {path.name}: {said}")
    return lines


def verdict(cases: list[dict[str, Any]]) -> str:
    outcomes = {c["outcome"] for c in cases}
    if outcomes & {"failed", "error"}:
        return "FAILED "
    return "passed " if "passed" in outcomes else "skipped"


def summary(cases: list[dict[str, Any]]) -> str:
    counts: dict[str, int] = {}
    for case in cases:
        counts[case["outcome"]] = counts.get(case["outcome"], 0) + 1
    parts = [", ".join(f"{n} {outcome}" for outcome, n in sorted(counts.items()))]
    parts += [f"{c['nodeid'].split('::')[-1]} {c['outcome']}" for c in cases if c["outcome"] in ("failed", "error")]
    for case in cases:
        medians = {name: metric["stats"]["median"] for name, metric in case.get("metrics", {}).items()
                   if name in ("busbw_gbps", "peak_cuda_mb") and metric.get("stats")}
        if medians:
            parts.append(case["nodeid"].split("::")[-1] + " " + " ".join(f"{k}={v:.4g}" for k, v in medians.items()))
    if any(PEAK_CASE in c["nodeid"] for c in cases):
        peaks = [m["stats"]["median"] for c in cases for n, m in c.get("metrics", {}).items()
                 if n == "peak_cuda_mb" and m.get("stats")]
        if not peaks:
            parts.append("FAILED: no peak_cuda_mb recorded")
        elif min(peaks) < PEAK_MB:
            parts.append(f"FAILED: peak_cuda_mb {min(peaks):.4g} below the {PEAK_MB:.4g} MB the case holds")
    return "; ".join(parts)


def run_session(folder: Path, name: str, args: list[str], timeout_s: float, cwd: Path) -> list[dict[str, Any]]:
    """One pytest session on NCCL, run in ``cwd``, writing to ``folder``; its cases from ``--dmlbench-json`` (none
    if it wrote none)."""
    results = folder / f"{name}.json"
    command = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "-rs", "--dmlbench",
               "--dmlbench-backend", "nccl", "--dmlbench-json", str(results), *args]
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "RANK", "WORLD_SIZE", "MASTER_"))}
    try:
        done = subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout_s,
                              check=False)
        output = done.stdout + done.stderr
    except subprocess.TimeoutExpired as exc:
        parts = [p.decode(errors="replace") if isinstance(p, bytes) else p for p in (exc.stdout, exc.stderr) if p]
        output = "".join(parts) + f"\ntimed out after {timeout_s:.0f} s"
    (folder / f"{name}.log").write_text(" ".join(command) + "\n" + str(output))
    if not results.exists():
        print(f"{name}: pytest wrote no results; the end of its output:\n{str(output)[-3000:]}")
        return []
    cases: list[dict[str, Any]] = json.loads(results.read_text())["cases"]
    return cases


def main(argv: list[str] | None = None, count_devices: Callable[[], int] | None = None) -> int:
    """Run the paths and print the report; ``count_devices`` defaults to the plugin's own count."""
    args = parse_args(argv)
    if count_devices is None:
        from pytest_dmlbench.world.cuda_count import cuda_device_count

        devices = cuda_device_count()
    else:
        devices = count_devices()
    ranks, why_not = world_size(args.ranks, devices)
    started = time.monotonic()
    print(f"{datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC; {platform.node()}, {devices} CUDA device(s), "
          f"{os.cpu_count()} cores, load {os.getloadavg()[0]:.1f}; `python -m studies.gpu_paths"
          + (f" --ranks {args.ranks}" if args.ranks else "") + "`")
    cases: list[dict[str, Any]] = []
    if why_not is None:
        with tempfile.TemporaryDirectory(prefix="gpu-paths-") as scratch:
            folder = (args.keep or Path(scratch)).resolve()  # the sessions run in other folders
            folder.mkdir(parents=True, exist_ok=True)
            (folder / "test_gpu_paths.py").write_text(CASES)
            budget = args.timeout_s
            cases += run_session(folder, "gpu_cases", ["--world-size", str(ranks), "test_gpu_paths.py"],
                                 budget * 0.6, cwd=folder)
            left = max(30.0, budget - (time.monotonic() - started))
            cases += run_session(folder, "equivalence", ["--world-size", str(ranks), "-k", "float64 and mlp",
                                                         "bench_cases/test_equivalence.py"], left, cwd=ROOT)
    lines = path_lines(cases, ranks, why_not)
    print(f"GPU paths at {ranks} rank(s) on NCCL, {time.monotonic() - started:.0f} s:")
    print("\n".join(lines))
    if why_not is not None:
        return 2
    return 1 if any("FAILED" in line for line in lines) else 0


if __name__ == "__main__":
    sys.exit(main())
